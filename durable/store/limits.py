"""Named limits' rows (LimitGate, LimitTicket, LimitUse): what a limit holds now, read and changed by the worker
that holds its gate row; portable to SQLite and Postgres. What to do with them is durable/runtime/limits.py's.

Every function that reads room and takes it runs inside the caller's transaction, after `lock`: the gate row of the
limit and key is the one lock every worker takes first, so two workers never both see the last slot free. On
Postgres `take_at_once` does the common case (lock, read, take) in one statement, through durable_limit_take
(migration 0034), which reads and takes as `lock`, `held_now` and `take` do.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import connection
from django.db.models import Count, F, Q, Sum
from django.db.models.expressions import RawSQL
from django.utils import timezone

from durable.engine.call_limits import LimitNow, LimitSpec
from durable.engine.states import TERMINAL, RunStatus
from durable.models import LimitGate, LimitTicket, LimitUse

HELD, WAITING, GRANTED = LimitTicket.State.HELD, LimitTicket.State.WAITING, LimitTicket.State.GRANTED
# A slot counts while the lease that took it holds: the run still RUNNING under the same fencing token. A worker
# that died leaves its slot to the next claim of the run (a new token), which frees it: capacity never leaks.
_LIVE_HOLD = Q(state=HELD, run__status=RunStatus.RUNNING, run__fencing_token=F("token"))


def _kept(at: datetime, grace_seconds: float) -> Q:
    """Room granted to a woken run, still kept for it: within the grace period, and the run has not ended."""
    return Q(state=GRANTED, granted_at__gt=at - timedelta(seconds=grace_seconds)) & ~Q(run__status__in=TERMINAL)


def now() -> datetime:
    """The database's clock (SQLite: this machine's)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        moment: datetime = cursor.fetchone()[0]
        return moment


def lock(limit: str, key: str) -> tuple[LimitGate, datetime]:
    """Inside a transaction: the limit's gate row for `key` (created if new, held until the transaction ends), and
    the database's clock read once it is held, in the same statement: call starts are ordered as the gate orders
    them. On SQLite the UPDATE takes the database's write lock before anything is read (a read first would have to
    be upgraded, and could fail as busy)."""
    gates = LimitGate.objects.filter(limit=limit, key=key)
    if connection.vendor == "postgresql":
        locked = gates.select_for_update().annotate(clock=RawSQL("clock_timestamp()", ()))
        gate = locked.first()
        if gate is None:  # a new key: its row, then the lock on it
            LimitGate.objects.bulk_create([LimitGate(limit=limit, key=key)], ignore_conflicts=True)
            gate = locked.get()
        return gate, gate.clock  # the annotation above
    LimitGate.objects.bulk_create([LimitGate(limit=limit, key=key)], ignore_conflicts=True)
    gates.update(touched_at=timezone.now())
    return gates.get(), timezone.now()


def in_one_statement() -> bool:
    """Whether the common case can be taken in one statement (`take_at_once`): Postgres, through the function
    migration 0034 declares."""
    return connection.vendor == "postgresql"


@dataclass(frozen=True)
class AtOnce:
    """What `take_at_once` did: room taken (its slot's ticket id and start's id), or nothing, and why: runs wait in
    line or the call has a ticket (`in_line`: the runtime's path decides), or the limit is full (`held` says until
    when)."""

    taken: bool
    in_line: bool
    slot: int | None
    use: int | None
    held: LimitNow
    started: datetime | None  # the start it recorded (rate, tokens), by the database's clock


def take_at_once(spec: LimitSpec, key: str, run_id: UUID, call: str, token: int, priority: int,
                 grace_seconds: float, *, replacing: int | None = None) -> AtOnce:
    """Postgres: the limit's gate taken, what it holds read by the clock and, when nobody waits in line and there is
    room, the room taken, in one statement (its own transaction outside the caller's): the gate row is held for the
    statement only (durable_limit_take, migration 0034, reads and takes as `held_now` and `take` do). `replacing`:
    the start (LimitUse id; 0 once deleted) of a call that takes a new one in its place, keeping its place in line
    and the slot it holds (its concurrency and tokens, which it passed, are not counted again)."""
    rate, tokens, concurrency = spec.rate, spec.tokens, spec.concurrency
    if replacing is not None:
        tokens = concurrency = None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM durable_limit_take(%s::text, %s::text, %s::uuid, %s::text, %s::bigint, %s::integer, "
            "%s::integer, %s::integer, %s::float8, %s::bigint, %s::float8, %s::float8, %s::float8, %s::text[], "
            "%s::bigint)",
            [spec.name, key, run_id, call, token, priority, concurrency, rate.count if rate else None,
             rate.seconds + spec.margin if rate else None, tokens.count if tokens else None,
             tokens.seconds if tokens else None, spec.window_seconds, grace_seconds, sorted(TERMINAL), replacing])
        taken, in_line, slot, use, at, held, granted, paused, starts, used, started = cursor.fetchone()
    now = LimitNow(at, in_use=held + granted, starts=tuple(starts),
                   tokens=tuple((start, count) for start, count in zip(starts, used, strict=True) if count),
                   granted=granted, paused_until=paused)
    return AtOnce(taken, in_line, slot, use, now, started)


def paused_until(gate: LimitGate) -> datetime | None:
    """The limit's pause (kept on its row for key "")."""
    if gate.key == "":
        return gate.paused_until
    return LimitGate.objects.filter(limit=gate.limit, key="").values_list("paused_until", flat=True).first()


def pause(limit: str, until: datetime) -> None:
    """Pause every key of the limit until `until` (a later pause already set stays)."""
    LimitGate.objects.bulk_create([LimitGate(limit=limit, key="")], ignore_conflicts=True)
    LimitGate.objects.filter(Q(paused_until__isnull=True) | Q(paused_until__lt=until), limit=limit, key=""
                             ).update(paused_until=until)


@dataclass(frozen=True)
class Tickets:
    """What the tickets of a limit and key say, besides the room they hold: whether anyone waits (or was granted
    room that it let pass), and the asking call's own ticket."""

    queued: bool  # a ticket WAITING, or GRANTED past its grace: the line must be served in order
    mine: bool  # the asking call has a ticket
    mine_kept: bool  # ...GRANTED and still kept for it


def held_now(spec: LimitSpec, gate: LimitGate, at: datetime, grace_seconds: float, run_id: UUID | None = None,
             call: str = "") -> tuple[LimitNow, Tickets]:
    """What the limit holds for the gate's key at `at` (live slots, room granted to woken runs, starts and tokens in
    the window) and what its tickets say: two queries, one without a rate or tokens."""
    tickets = LimitTicket.objects.filter(limit=gate.limit, key=gate.key)
    kept = _kept(at, grace_seconds)
    mine = Q(run_id=run_id, call=call)
    counts = tickets.aggregate(
        held=Count("id", filter=_LIVE_HOLD), granted=Count("id", filter=kept),
        queued=Count("id", filter=Q(state=WAITING) | (Q(state=GRANTED) & ~kept)),
        mine=Count("id", filter=mine), mine_kept=Count("id", filter=mine & kept))
    starts: tuple[datetime, ...] = ()
    tokens: tuple[tuple[datetime, int], ...] = ()
    if spec.rate is not None or spec.tokens is not None:
        since = at - timedelta(seconds=spec.window_seconds)
        rows = list(LimitUse.objects.filter(limit=gate.limit, key=gate.key, started_at__gt=since)
                    .order_by("started_at").values_list("started_at", "tokens"))
        starts = tuple(started for started, _ in rows)
        tokens = tuple((started, count) for started, count in rows if count)
    held = LimitNow(at, in_use=counts["held"] + counts["granted"], starts=starts, tokens=tokens,
                    granted=counts["granted"], paused_until=paused_until(gate))
    return held, Tickets(counts["queued"] > 0, counts["mine"] > 0, counts["mine_kept"] > 0)


@dataclass(frozen=True)
class Waiter:
    ticket: int
    run_id: UUID
    run_status: str
    priority: int
    arrived_at: datetime
    state: str


def waiters(gate: LimitGate, at: datetime, grace_seconds: float) -> list[Waiter]:
    """Tickets waiting for room (and granted ones whose grace passed: waiting again, in their place), oldest
    first; tickets of runs that ended are deleted."""
    tickets = LimitTicket.objects.filter(limit=gate.limit, key=gate.key)
    tickets.filter(state=GRANTED, granted_at__lte=at - timedelta(seconds=grace_seconds)).update(
        state=WAITING, granted_at=None)
    rows = [Waiter(*row) for row in tickets.filter(state=WAITING).values_list(
        "id", "run_id", "run__status", "priority", "arrived_at", "state")]
    ended = [waiter.ticket for waiter in rows if waiter.run_status in TERMINAL]
    if ended:
        LimitTicket.objects.filter(id__in=ended).delete()
    return [waiter for waiter in rows if waiter.ticket not in ended]


def queue(run_id: UUID, gate: LimitGate, call: str, priority: int, at: datetime) -> LimitTicket:
    """The run's ticket for its call, WAITING from `at` unless it has one (a slot left by a dead lease waits again,
    keeping its place)."""
    ticket, created = LimitTicket.objects.get_or_create(
        run_id=run_id, limit=gate.limit, call=call,
        defaults={"key": gate.key, "state": WAITING, "priority": priority, "arrived_at": at})
    if not created and ticket.state == HELD:
        LimitTicket.objects.filter(id=ticket.id).update(state=WAITING)
        ticket.state = WAITING
    return ticket


def grant(tickets: Iterable[int], at: datetime) -> None:
    """Keep room for these waiters' runs, woken to take it."""
    LimitTicket.objects.filter(id__in=list(tickets)).update(state=GRANTED, granted_at=at)


def take(spec: LimitSpec, gate: LimitGate, run_id: UUID, call: str, token: int, priority: int, at: datetime,
         ticketed: bool) -> tuple[int | None, int | None]:
    """The call starts: a slot held under the lease's token (concurrency), a start in the window (rate, tokens).
    `ticketed`: the call has a ticket (it waited). Returns (the slot's ticket id, the start's id), each None when
    the limit does not count it."""
    slot = None
    if spec.concurrency is not None:
        held = {"key": gate.key, "state": HELD, "token": token, "granted_at": None}
        if ticketed:
            slot = LimitTicket.objects.update_or_create(run_id=run_id, limit=gate.limit, call=call, defaults=held,
                                                        create_defaults={**held, "priority": priority,
                                                                         "arrived_at": at})[0].id
        else:
            slot = LimitTicket.objects.create(run_id=run_id, limit=gate.limit, call=call, priority=priority,
                                              arrived_at=at, **held).id
    elif ticketed:
        LimitTicket.objects.filter(run_id=run_id, limit=gate.limit, call=call).delete()
    use = None
    if spec.rate is not None or spec.tokens is not None:
        # Its start as late as the gate allows, by the clock, right before the call goes out (still ordered by the
        # gate, and no earlier than the moment its room was counted at).
        clock = RawSQL("clock_timestamp()", ()) if connection.vendor == "postgresql" else timezone.now()
        use = LimitUse.objects.create(limit=gate.limit, key=gate.key, started_at=clock).id
        if use % 32 == 0:  # now and then, the starts the window no longer needs
            LimitUse.objects.filter(limit=gate.limit, key=gate.key,
                                    started_at__lte=at - timedelta(seconds=spec.window_seconds)).delete()
    return slot, use


def give_back(slot: int | None, use: int | None, tokens: int) -> None:
    """The call answered (or failed): its slot freed, the tokens it used counted in the window from its start."""
    if slot is not None:
        LimitTicket.objects.filter(id=slot, state=HELD).delete()
    if use is not None and tokens:
        LimitUse.objects.filter(id=use).update(tokens=tokens)


def forget_start(use: int) -> None:
    """A call's start taken back (it takes a new one in its place)."""
    LimitUse.objects.filter(id=use).delete()


def has_waiters(limit: str, key: str) -> bool:
    return LimitTicket.objects.filter(limit=limit, key=key, state=WAITING).exists()


@dataclass(frozen=True)
class LimitRow:
    """One limit and key as the console and the metrics show it."""

    limit: str
    key: str
    in_use: int
    waiting: int
    paused_until: datetime | None


def use_by_key(grace_seconds: float) -> list[LimitRow]:
    """Every limit and key with a slot held, room granted or a run waiting, and every paused limit: one query
    for the counts, one for the pauses."""
    at = timezone.now()
    fresh = _kept(at, grace_seconds)
    waiting = Q(state=WAITING, run__status=RunStatus.WAITING)
    counts = {(limit, key): (held, woken, parked) for limit, key, held, woken, parked in
              LimitTicket.objects.values("limit", "key").annotate(
                  held=Count("id", filter=_LIVE_HOLD), woken=Count("id", filter=fresh),
                  parked=Count("id", filter=waiting)).values_list("limit", "key", "held", "woken", "parked")}
    paused = dict(LimitGate.objects.filter(key="", paused_until__gt=at).values_list("limit", "paused_until"))
    keys = set(counts) | {(limit, "") for limit in paused}
    return [LimitRow(limit, key, counts.get((limit, key), (0, 0, 0))[0] + counts.get((limit, key), (0, 0, 0))[1],
                     counts.get((limit, key), (0, 0, 0))[2], paused.get(limit)) for limit, key in sorted(keys)]


def used_since(limit: str, key: str, since: datetime) -> tuple[int, int]:
    """Call starts and tokens counted under the limit and key since `since`."""
    found = LimitUse.objects.filter(limit=limit, key=key, started_at__gt=since).aggregate(
        starts=Count("id"), tokens=Sum("tokens"))
    return int(found["starts"] or 0), int(found["tokens"] or 0)
