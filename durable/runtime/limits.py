"""Named limits on a run's calls (docs/workflows.md, "Limits and priority"): a call that names a limit
takes room in it before it goes out and gives it back after, across every worker; a call that finds none parks its
run (WAITING, `waiting_for` kind `limit`), holding no worker and no connection, until room frees.

The order: a call takes its limit's gate row (durable/store/limits.py), reads what the limit holds by the database's
clock, and, when runs already wait, serves them first in priority then arrival order (granting them the room and
waking them: a newcomer cannot take what a woken run was promised). A call that must wait less than
DURABLE_LIMIT_SPIN_SECONDS (a rate's window slides in a few milliseconds) waits in its thread and tries again;
longer, its run is parked, with its due time when the clock alone frees the room (a window, a pause) or a recheck
as a backstop (a slot freed by a dead worker's run being claimed again wakes nobody). A call that gives a slot
back wakes the next waiters. A provider's 429 with Retry-After on a call under a limit pauses the whole limit.

In one process, one thread at a time goes to a limit's gate (for a key): the others wait for their turn holding no
connection, and the one whose turn it is sleeps, when the limit is full, until the moment the window frees room.
On Postgres the common case (nobody in line, room or none) is one statement (durable_limit_take); the rest goes
through the gate in a transaction as above. A call under a rate that would leave later than half the rate's margin
after its recorded start takes a new start in its place first (`on_time`): arrivals then hold to N a period too.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import connection, transaction
from django.db.models import Q

from durable import metrics
from durable.conf import durable_settings
from durable.engine.call_limits import LimitError, LimitSpec, admits, declared_in_code, frees_at, in_order, parse_limits
from durable.engine.costs import UsageOf
from durable.engine.errors import NonRetryableError, Waiting, classify
from durable.engine.states import RunStatus
from durable.engine.waits import WaitingFor, WaitKind
from durable.runtime import wakes
from durable.runtime.heartbeat import give_back_connection
from durable.runtime.visit import Visit
from durable.store import limits as rows

log = logging.getLogger("durable.limits")
_LIMIT_WAIT = Q(waiting_for__kind=WaitKind.LIMIT.value)
T = TypeVar("T")
RETAKES = 3  # a late call takes a new start at most this many times (then it is sent, with a warning)


def declared() -> dict[str, LimitSpec]:
    """Every limit: those declared in code, and DURABLE_LIMITS's (which win). LimitError when a setting is wrong
    (the system check durable.E045 names it at start-up)."""
    margin = float(durable_settings.DURABLE_LIMIT_RATE_MARGIN_SECONDS)
    return {name: replace(spec, margin=margin) for name, spec in
            {**declared_in_code, **parse_limits(durable_settings.DURABLE_LIMITS)}.items()}


def spec_of(name: str) -> LimitSpec:
    try:
        limits = declared()
    except LimitError as exc:
        raise NonRetryableError(f"DURABLE_LIMITS is wrong: {exc}", kind="limit_not_declared") from None
    if name not in limits:
        raise NonRetryableError(f"a call names limit {name!r}, which is not declared (declared: "
                                f"{', '.join(sorted(limits)) or 'none'}); declare it in DURABLE_LIMITS or with "
                                "durable.limit(...)", kind="limit_not_declared")
    return limits[name]


def _grace() -> float:
    """How long room granted to a woken run is kept for it."""
    return float(durable_settings.DURABLE_PENDING_GRACE_SECONDS)


@dataclass
class Taken:
    """Room a call took: what to give back once it answers."""

    spec: LimitSpec
    key: str
    slot: int | None
    use: int | None
    started: float = 0.0  # the earliest this process's clock (time.time()) can have read when its start was recorded


def take(visit: Visit, name: str | None, index: int, *, may_park: bool = True) -> Taken | None:
    """Room for the visit's call `index` under limit `name` (None: the call names no limit); its run is parked
    (Waiting is raised) when there is none soon. Without `may_park`, None then (a parallel group with calls in
    flight waits for one of them to answer instead)."""
    if name is None:
        return None
    spec = spec_of(name)
    key = spec.key_of(visit.business_key, visit.run_input)
    call = f"{visit.visit}.{index}"
    waited = False
    # The step's write read and the connection given back before the turn is waited for: a thread waiting for its
    # process's turn at the gate holds no connection (invariant 21), and the pool stays free to record answers.
    visit.store.confirm_writes()
    give_back_connection()
    with turns.turn(name, key):
        while True:
            connection.ensure_connection()  # a wait for the pool's connection is not counted in `asked`
            asked = time.time()
            if rows.in_one_statement():  # the common case, one round trip: room taken, or the limit full
                quick = rows.take_at_once(spec, key, visit.run_id, call, visit.lease.token, visit.priority, _grace())
                database_clock.seen(asked, quick.held.now)
                if quick.taken:
                    started = database_clock.earliest(quick.started or quick.held.now, asked)
                    return Taken(spec, key, quick.slot, quick.use, started)
                at, due = quick.held.now, frees_at(spec, quick.held)
                if not quick.in_line and (_short(at, due) or not may_park):
                    waited = _throttled(name, waited)
                    if not _short(at, due):
                        return None
                    _sleep_until(due, at)
                    continue
            # Runs wait in line, the call has a ticket, or its run must park: under the gate, in a transaction.
            parked = None
            with transaction.atomic():
                gate, at = rows.lock(name, key)
                database_clock.seen(asked, at)
                taken, due = _admit(visit, spec, gate, call, at)
                if taken is not None:
                    taken.started = database_clock.earliest(at, asked)  # its start was recorded after `at`
                    return taken
                waited = _throttled(name, waited)
                short = _short(at, due)
                if not short and not may_park:
                    return None
                if not short:
                    recheck = at + timedelta(seconds=durable_settings.DURABLE_LEASE_SECONDS)
                    parked = _park(visit, spec, key, index, due or recheck)
            if parked is not None:  # committed: the run waits, released
                metrics.wait_started(visit.workflow_name, visit.workflow_version, WaitKind.LIMIT.value)
                log.info("run waits for %s", parked.describe())
                raise Waiting(parked.describe())
            _sleep_until(due, at)


def on_time(visit: Visit, taken: Taken | None, fn: Callable[..., T]) -> Callable[..., T]:
    """`fn`, run where the call is sent from (its call thread), made to leave within the rate's margin of the start
    its limit recorded: a call that would leave later (a loaded process, a slow commit) takes a new start in place of
    its own first, through the gate, waiting for room if it must. The margin is what a provider counting arrivals
    relies on (invariant 22): N recorded starts in any period + margin, each call arriving within the margin of its
    start, is N arrivals at most in any period."""
    if taken is None or taken.use is None or taken.spec.rate is None or taken.spec.margin <= 0:
        return fn  # no rate, or no margin to keep (DURABLE_LIMIT_RATE_MARGIN_SECONDS = 0)

    def sent_on_time(*args: Any, **kwargs: Any) -> T:
        _on_time(visit, taken)
        return fn(*args, **kwargs)

    return sent_on_time


def _on_time(visit: Visit, taken: Taken) -> None:
    """Retake the call's start while it may be older than half the margin (the other half is for what comes between
    here and the call's arrival): a statement for a late call, none for one on time. A process so loaded that a start
    it just took is late again RETAKES times over sends the call, saying so: its margin is too small for it."""
    late = taken.spec.margin / 2
    replacing = taken.use
    rate_only = replace(taken.spec, concurrency=None, tokens=None)  # the call holds its slot, and passed the tokens
    retaken = 0
    while time.time() - taken.started > late:
        if retaken == RETAKES:
            log.warning("limit %s: a call leaves %.3f s after its recorded start although it took a new one %d times; "
                        "DURABLE_LIMIT_RATE_MARGIN_SECONDS (%s s) is too small for this process's load",
                        taken.spec.name, time.time() - taken.started, RETAKES, taken.spec.margin)
            break
        connection.ensure_connection()
        asked = time.time()
        if rows.in_one_statement():
            quick = rows.take_at_once(taken.spec, taken.key, visit.run_id, "", visit.lease.token, visit.priority,
                                      _grace(), replacing=replacing)
            use, at, due = quick.use if quick.taken else None, quick.held.now, frees_at(rate_only, quick.held)
            database_clock.seen(asked, at)
            started = database_clock.earliest(quick.started or at, asked)
        else:
            with transaction.atomic():
                gate, at = rows.lock(taken.spec.name, taken.key)
                database_clock.seen(asked, at)
                started = database_clock.earliest(at, asked)
                if replacing:
                    rows.forget_start(replacing)
                held = rows.held_now(rate_only, gate, at, _grace())[0]
                use, due = None, frees_at(rate_only, held)
                if admits(rate_only, held) >= 1:
                    use = rows.take(rate_only, gate, visit.run_id, "", visit.lease.token, visit.priority, at,
                                    False)[1]
        if not retaken and replacing:  # counted once a call
            metrics.limit_retaken(taken.spec.name)
        replacing = 0  # gone
        if use is not None:  # the new start is the one a later retake replaces
            taken.use, taken.started, replacing = use, started, use
            retaken += 1
            continue
        _sleep_until(due, at)
    give_back_connection()


class _DatabaseClock:
    """When, by this process's clock, the database's clock read a given moment, at the earliest: each statement
    sent at local time `asked` that read the database's clock `at` says that this process's clock is ahead of the
    database's by at least `asked - at` (the reading came after the sending); the most of the recent ones is the
    tightest such bound (the same machine's clock: a fraction of a millisecond). A call's lateness measured from its
    start's earliest local time is never less than the truth, whatever the two clocks say."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ahead: deque[float] = deque(maxlen=64)  # recent statements only: clocks drift

    def seen(self, asked: float, at: datetime) -> None:
        with self._lock:
            self._ahead.append(asked - at.timestamp())

    def earliest(self, moment: datetime, asked: float) -> float:
        """The earliest this process's clock can have read when the database's read `moment` (which came after the
        statement sent at `asked`)."""
        with self._lock:
            ahead = max(self._ahead, default=-math.inf)
        return max(asked, moment.timestamp() + ahead)


database_clock = _DatabaseClock()


def _short(at: datetime, due: datetime | None) -> bool:
    """Whether the limit frees room soon enough, by the clock alone, for the call to wait in its thread."""
    return due is not None and (due - at).total_seconds() <= durable_settings.DURABLE_LIMIT_SPIN_SECONDS


def _throttled(name: str, waited: bool) -> bool:
    if not waited:  # counted once per call
        metrics.limit_throttled(name)
    return True


def _sleep_until(due: datetime | None, at: datetime) -> None:
    """A short wait, out of any transaction and holding no connection, until the moment the limit frees room (as
    the database's clock said at `at`; None: a millisecond); the turn is kept: this process's other calls would find
    the limit as full."""
    give_back_connection()
    time.sleep(max((due - at).total_seconds(), 0.001) if due is not None else 0.001)


class _Turns:
    """One thread per process at a time at a limit's gate (for one key): the others wait here, holding no connection
    and no transaction, rather than each holding one of the pool's connections while it queues on the gate row's lock
    (docs/benchmarks.md, "a rate limit across workers"). The gate row stays the authority across processes."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], tuple[threading.Lock, list[int]]] = {}
        if hasattr(os, "register_at_fork"):  # a forked process inherits no threads, so no turn is held there
            os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._guard = threading.Lock()
        self._locks = {}

    @contextmanager
    def turn(self, name: str, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.setdefault((name, key), (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._locks[(name, key)]


turns = _Turns()


def _admit(visit: Visit, spec: LimitSpec, gate: Any, call: str, at: datetime) -> tuple[Taken | None, datetime | None]:
    """Under the gate: the call takes room (Taken), or not (None, and when the clock alone frees some). The common
    case, room and nobody in line, reads two queries and writes one or two rows."""
    held, tickets = rows.held_now(spec, gate, at, _grace(), visit.run_id, call)
    if tickets.mine_kept:
        return _take(visit, spec, gate, call, at, ticketed=True), None  # room kept for this run when it was woken
    room = admits(spec, held)
    if not tickets.queued and room >= 1:
        return _take(visit, spec, gate, call, at, ticketed=tickets.mine), None
    queued = rows.waiters(gate, at, _grace())
    mine = rows.queue(visit.run_id, gate, call, visit.priority, at)
    if all(waiter.ticket != mine.id for waiter in queued):  # this call's place in line, new or kept
        queued.append(rows.Waiter(mine.id, visit.run_id, RunStatus.RUNNING, mine.priority, mine.arrived_at,
                                  rows.WAITING))
    served, me = _serve(queued, room, own=mine.id)
    _grant_and_wake(served, at)
    if me:
        return _take(visit, spec, gate, call, at, ticketed=True), None
    return None, frees_at(spec, replace(held, granted=held.granted + len(served), in_use=held.in_use + len(served)))


def _serve(queued: list[rows.Waiter], room: int | float, own: int | None) -> tuple[list[rows.Waiter], bool]:
    """The waiters room goes to, in priority then arrival order, and whether this call (ticket `own`) is one. A run
    not parked (woken by its due time, on its way) is passed over: it asks for itself when it comes."""
    by_ticket = {waiter.ticket: waiter for waiter in queued}
    served: list[rows.Waiter] = []
    me = False
    for _, _, ticket in in_order((w.priority, w.arrived_at, w.ticket) for w in queued):
        if room < 1:
            break
        if ticket == own:
            me, room = True, room - 1
        elif by_ticket[ticket].run_status == RunStatus.WAITING:
            served.append(by_ticket[ticket])
            room -= 1
    return served, me


def _grant_and_wake(served: list[rows.Waiter], at: datetime) -> None:
    if not served:
        return
    rows.grant([waiter.ticket for waiter in served], at)
    for waiter in served:  # each sent once the grant commits; a run no longer parked on a limit is left alone
        wakes.wake(waiter.run_id, _LIMIT_WAIT)


def _take(visit: Visit, spec: LimitSpec, gate: Any, call: str, at: datetime, *, ticketed: bool) -> Taken:
    slot, use = rows.take(spec, gate, visit.run_id, call, visit.lease.token, visit.priority, at, ticketed)
    return Taken(spec, gate.key, slot, use)


def _park(visit: Visit, spec: LimitSpec, key: str, index: int, due: datetime) -> WaitingFor:
    """Inside the gate's transaction: the run waits for room, released; woken by a call giving room back, or by
    its due time (the window slides, the pause ends, or a recheck)."""
    waiting = WaitingFor(WaitKind.LIMIT, visit.step, visit.visit, due, call_index=index, limit=spec.name,
                         limit_key=key)
    visit.store.park(visit.lease, visit.step, waiting.as_json(), due)
    left = (due - rows.now()).total_seconds()  # from when it is parked
    run_id = visit.run_id
    if wakes.arm_on_park and left < 2 * durable_settings.DURABLE_SWEEP_SECONDS:
        transaction.on_commit(lambda: wakes.arm(run_id, left))
    return waiting


def give_back(taken: Taken | None, *, answer: Any = None, usage: UsageOf | None = None,
              error: BaseException | None = None) -> None:
    """The call answered (its tokens counted from its usage) or failed (a Retry-After pauses the limit): its slot
    is freed, and the runs waiting for it are woken."""
    if taken is None:
        return
    tokens = _tokens(answer, usage) if error is None and taken.spec.tokens is not None else 0
    pause_for = classify(error).retry_after if isinstance(error, Exception) else None
    if taken.slot is None and pause_for is None:
        if tokens:
            rows.give_back(None, taken.use, tokens)
        return
    with transaction.atomic():
        # Under the gate: a call that found no room and parks did so before this (its ticket is seen below) or sees
        # the slot freed; no wake is lost between the two.
        gate, at = rows.lock(taken.spec.name, taken.key)
        rows.give_back(taken.slot, taken.use, tokens)
        if pause_for is not None and pause_for > 0:
            rows.pause(taken.spec.name, at + timedelta(seconds=pause_for))
            metrics.limit_throttled(taken.spec.name)
            log.warning("limit %s paused for %.1f s: a call under it was asked to wait (%s)", taken.spec.name,
                        pause_for, error)
            return  # its waiters wake when the pause ends (their due time)
        if rows.has_waiters(taken.spec.name, taken.key):  # runs wait: the room goes to them in order
            queued = rows.waiters(gate, at, _grace())
            room = admits(taken.spec, rows.held_now(taken.spec, gate, at, _grace())[0])
            _grant_and_wake(_serve(queued, room, own=None)[0], at)


def _tokens(answer: Any, usage: UsageOf | None) -> int:
    """The tokens a call used, as its usage function reads its answer (0 when it says nothing)."""
    if usage is None:
        return 0
    try:
        used = usage(answer)
    except Exception:  # the call's record says why (durable.runtime.costs); the limit counts nothing
        return 0
    return 0 if used is None else int(used.input_tokens) + int(used.output_tokens)


@dataclass
class Held:
    """Room a call holds (`held`): its answer goes in `answers` (its tokens are counted from it), and the call is
    sent through `on_time`."""

    visit: Visit
    taken: Taken | None
    answers: list[Any] = field(default_factory=list)

    def on_time(self, fn: Callable[..., T]) -> Callable[..., T]:
        return on_time(self.visit, self.taken, fn)


@contextmanager
def held(visit: Visit, name: str | None, index: int, usage: UsageOf | None) -> Iterator[Held]:
    """Around one call: room taken before it (or the run parked), given back after, whatever happened; the
    caller puts the answer in the yielded `answers` so its tokens are counted, and sends the call through its
    `on_time`."""
    taken = take(visit, name, index)
    holding = Held(visit, taken)
    try:
        yield holding
    except BaseException as exc:
        give_back(taken, error=exc)
        raise
    give_back(taken, answer=holding.answers[0] if holding.answers else None, usage=usage)
