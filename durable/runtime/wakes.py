"""Waking parked runs (invariants 17-19): by the database's clock, by an event that arrived, by a child's end.

A wake is one conditional UPDATE from WAITING to PENDING and a message sent once it is committed; the worker
that claims the run re-executes the visit, whose wait then finds what it waited for. Waking a run that no longer
waits changes nothing, and a duplicate message is harmless (the lease decides).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from uuid import UUID

from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.states import RunStatus
from durable.engine.waits import WaitKind
from durable.models import Run
from durable.runtime import transitions
from durable.runtime.fault_points import AFTER_CHILD_FINISHED, fault_point
from durable.runtime.forks import between_forks
from durable.scope import runs_in_scope

log = logging.getLogger("durable.sweeper")

# Due by the database's clock, never a worker's: a skewed worker cannot fire a timer early (invariant 17).
_DUE = Q(status=RunStatus.WAITING, next_attempt_at__lte=Now())
_WAITS_ON_CHILDREN = Q(waiting_for__kind=WaitKind.CHILD.value)


def wake_due(limit: int = 1000) -> list[UUID]:
    """Parked runs whose timer or event deadline is due: PENDING and sent. The query reads the due ones only
    (index run_wake_due), however many runs are parked."""
    ids = list(Run.objects.filter(_DUE, runs_in_scope()).order_by("next_attempt_at")
               .values_list("id", flat=True)[:limit])
    return _wake(ids)


def _wake(ids: list[UUID]) -> list[UUID]:
    # updated_at takes the due time: the claim measures the resume latency from it (durable.store.base._due_since).
    transitions.move_all(ids, RunStatus.PENDING, sources={RunStatus.WAITING}, where=_DUE,
                         updated_at=F("next_attempt_at"), next_attempt_at=None, enqueued_at=timezone.now())
    return ids


def wake(run_id: UUID | str, condition: Q | None = None) -> bool:
    """Inside the caller's transaction: the run, parked (and meeting `condition`), is PENDING and sent once that
    commits."""
    now = timezone.now()
    return transitions.move(run_id, RunStatus.PENDING, sources={RunStatus.WAITING}, where=condition,
                            next_attempt_at=None, updated_at=now, enqueued_at=now)


def parent_of(run_id: UUID | str) -> UUID | None:
    """The run's parent run's id (None: it has none)."""
    return Run.objects.filter(id=run_id).values_list("parent_run_id", flat=True).first()


@contextmanager
def child_ends(run_id: UUID | str, parent_id: UUID | str | None) -> Iterator[None]:
    """Around the write of a run's end (done, failed for good, cancelled): its parent, if it waits on its
    children, looks at them all again once the end is written. Before it, the parent is given a due time a grace
    period away: a crash between the end and the wake then delays the wake until the sweeper's, and loses none;
    the wake clears the due time (a parent woken early looks at its children and parks again)."""
    if parent_id is None:
        yield
        return
    _expect_child_end(parent_id)
    yield
    fault_point(AFTER_CHILD_FINISHED, operation_id=str(run_id), action="child_finished")
    wake_parent(parent_id)


def _expect_child_end(parent_id: UUID | str) -> None:
    due = timezone.now() + timedelta(seconds=durable_settings.DURABLE_PENDING_GRACE_SECONDS)
    with transaction.atomic():
        _row_of(parent_id)
        Run.objects.filter(_WAITS_ON_CHILDREN, id=parent_id, status=RunStatus.WAITING, next_attempt_at__isnull=True
                           ).update(next_attempt_at=due)


def wake_parent(parent_id: UUID | str) -> bool:
    """After the child's end is committed: the parent, if it waits on its children, is woken to look again."""
    with transaction.atomic():
        _row_of(parent_id)
        return wake(parent_id, _WAITS_ON_CHILDREN)


def _row_of(parent_id: UUID | str) -> None:
    """Take the parent's row, by its id alone. A parent that read its children before the child's end was
    committed holds its row until it has parked: this waits for that, and what follows sees it WAITING. A
    conditional UPDATE alone would not wait: Postgres skips a row whose last committed version (RUNNING) fails
    its condition, and the wake would be lost."""
    list(Run.objects.select_for_update().filter(id=parent_id).values_list("id", flat=True))


# Timers armed ahead of their due time by the worker whose turn it is to sweep, so a timer fires within
# milliseconds of its time rather than at the next sweep (which still wakes whatever these miss). One thread per
# process fires them and keeps its database connection while any is armed: a thread and a connection per timer
# cost a new Postgres backend each time, 20-30 ms between the due time and the wake (durable_bench --timers).
_armed: dict[UUID, float] = {}  # run id -> when to wake it, by time.monotonic()
# Set in Celery workers (durable.runtime.worker): a timer the worker parks that falls due before the next sweep is
# armed by the worker itself. Off elsewhere (a tool or a test advancing runs in its own process).
arm_on_park = False
_alarm = threading.Condition()
_alarm_thread: threading.Thread | None = None


def arm_timers(horizon_seconds: float, limit: int = 1000) -> int:
    """Arm an in-process timer for each run due within the horizon; returns how many were armed anew."""
    from durable.store import store

    now = store().db_now()
    # Read before taking the alarm's lock: whoever holds it never waits for a connection (a thread parking a run
    # arms its timer in a commit hook, holding its connection; with a pool of them, that was a deadlock).
    soon = list(Run.objects.filter(runs_in_scope(), status=RunStatus.WAITING, next_attempt_at__gt=now,
                                   next_attempt_at__lte=now + timedelta(seconds=horizon_seconds))
                .order_by("next_attempt_at").values_list("id", "next_attempt_at")[:limit])
    counted_from = time.monotonic()  # the database's clock says how long until each is due; this one counts it down
    armed = 0
    with _alarm:
        for run_id, due in soon:
            if run_id in _armed or due is None:
                continue
            _armed[run_id] = counted_from + (due - now).total_seconds() + 0.002
            armed += 1
        if armed:
            _start_alarm()
            _alarm.notify()
    return armed


def arm(run_id: UUID, seconds: float) -> None:
    """Arm this process's timer for a run it has just parked, due in `seconds`: it wakes on time, not at the next
    sweep (which wakes it if this process dies first). The wake is conditional on the database's clock."""
    with _alarm:
        _armed[run_id] = time.monotonic() + max(seconds, 0.0) + 0.002
        _start_alarm()
        _alarm.notify()


def _start_alarm() -> None:
    global _alarm_thread
    if _alarm_thread is None or not _alarm_thread.is_alive():
        _alarm_thread = threading.Thread(target=_ring, name="durable-timers", daemon=True)
        _alarm_thread.start()


def _ring() -> None:
    """The alarm thread: wake the armed runs as they fall due, those due together in one statement."""
    while True:
        with _alarm:
            idle = not _armed
        if idle:  # nothing armed: hold no connection while nothing needs it (never with the alarm's lock held: the
            with between_forks():  # sweeper's thread takes that lock inside between_forks, and arms in commit hooks)
                connection.close()
        with _alarm:
            _alarm.wait_for(lambda: _armed)
            now = time.monotonic()
            due = [run_id for run_id, at in _armed.items() if at <= now]
            if not due:
                _alarm.wait(min(_armed.values()) - now)
                continue
            for run_id in due:
                del _armed[run_id]
        _fire(due)


def _fire(run_ids: list[UUID]) -> None:
    try:
        with between_forks():  # the worker's pool forks from this process (durable.runtime.forks)
            connection.close_if_unusable_or_obsolete()
            _wake(list(Run.objects.filter(_DUE, id__in=run_ids).values_list("id", flat=True)))
    except Exception:  # the next sweep wakes them
        log.warning("armed timers could not wake runs %s; the sweeper will", run_ids, exc_info=True)
        with between_forks():
            connection.close()
