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
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q

from durable import metrics
from durable.conf import durable_settings
from durable.engine.call_limits import LimitError, LimitSpec, admits, declared_in_code, frees_at, in_order, parse_limits
from durable.engine.costs import UsageOf
from durable.engine.errors import NonRetryableError, Waiting, classify
from durable.engine.states import RunStatus
from durable.engine.waits import WaitingFor, WaitKind
from durable.runtime import wakes
from durable.runtime.visit import Visit
from durable.store import limits as rows

log = logging.getLogger("durable.limits")
_LIMIT_WAIT = Q(waiting_for__kind=WaitKind.LIMIT.value)


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


@dataclass(frozen=True)
class Taken:
    """Room a call took: what to give back once it answers."""

    spec: LimitSpec
    key: str
    slot: int | None
    use: int | None


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
    while True:
        parked = None
        with transaction.atomic():
            gate, at = rows.lock(name, key)
            taken, due = _admit(visit, spec, gate, call, at)
            if taken is not None:
                return taken
            if not waited:
                metrics.limit_throttled(name)
                waited = True
            short = due is not None and (due - at).total_seconds() <= durable_settings.DURABLE_LIMIT_SPIN_SECONDS
            if not short and not may_park:
                return None
            if not short:
                recheck = at + timedelta(seconds=durable_settings.DURABLE_LEASE_SECONDS)
                parked = _park(visit, spec, key, index, due or recheck)
        if parked is not None:  # committed: the run waits, released
            metrics.wait_started(visit.workflow_name, visit.workflow_version, WaitKind.LIMIT.value)
            log.info("run waits for %s", parked.describe())
            raise Waiting(parked.describe())
        assert due is not None
        time.sleep(max((due - at).total_seconds(), 0.001))  # a short wait, out of the transaction: then again


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


@contextmanager
def held(visit: Visit, name: str | None, index: int, usage: UsageOf | None) -> Iterator[list[Any]]:
    """Around one call: room taken before it (or the run parked), given back after, whatever happened; the
    caller puts the answer in the yielded list so its tokens are counted."""
    taken = take(visit, name, index)
    answered: list[Any] = []
    try:
        yield answered
    except BaseException as exc:
        give_back(taken, error=exc)
        raise
    give_back(taken, answer=answered[0] if answered else None, usage=usage)

