"""The sweeper: finds runs a worker must pick up again and re-enqueues them.

Each beat first runs what the apps built on the core add to it (approvals expires requests past their
deadline, reconciliation settles stale operations), registered with `add_to_sweep` from their ready().
Messages can be lost or duplicated; the database is what says what must run. A run whose
lease expired (its worker died), whose retry is due, or that sat PENDING past a grace
period (its message was lost) is sent again. Duplicates are harmless: the lease decides.
A run is re-sent at most once per grace period, and then with ever longer gaps
(durable.engine.resend), so a backlog is not flooded with copies. A tool's workers sweep only
the runs the tool created (durable.scope).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.db import IntegrityError
from django.db.models import F, Q
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.resend import resend_due
from durable.engine.states import RunStatus
from durable.models import Run, SweepTurn
from durable.notifications import sweeper as notifications
from durable.runtime import dispatch, wakes
from durable.scope import runs_in_scope, scoped_to


def due_runs(limit: int = 1000) -> list[UUID]:
    """Runs waiting for a worker whose next copy is due (durable.engine.resend), longest unsent first."""
    now = timezone.now()
    grace = timedelta(seconds=durable_settings.DURABLE_PENDING_GRACE_SECONDS)
    due = (
        Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
        | Q(status=RunStatus.WAITING_RETRY, next_attempt_at__lte=now)
        | Q(status=RunStatus.PENDING, updated_at__lt=now - grace)
    )
    # A run whose worker died is sent at once however recently it was last sent: that copy went to the
    # dead worker, before its lease began running out (resend_due's "not sent since it began waiting").
    not_just_sent = (Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=now - grace)
                     | Q(status=RunStatus.RUNNING, enqueued_at__lt=F("lease_expires_at")))
    # Read a few times the limit: the backoff, applied here, passes over runs sent not long ago.
    candidates = (Run.objects.filter(due & not_just_sent, runs_in_scope())
                  .order_by(F("enqueued_at").asc(nulls_first=True), "updated_at")
                  .values_list("id", "status", "updated_at", "lease_expires_at", "next_attempt_at", "enqueued_at")
                  [:limit * 4])
    return [run_id for run_id, status, updated_at, lease_expires_at, next_attempt_at, enqueued_at in candidates
            if resend_due(waiting_since=_waiting_since(status, updated_at, lease_expires_at, next_attempt_at),
                          last_sent=enqueued_at, now=now, grace=grace)][:limit]


def _waiting_since(status: str, updated_at: datetime, lease_expires_at: datetime | None,
                   next_attempt_at: datetime | None) -> datetime:
    """When the run began waiting for a worker: its lease ran out, its retry fell due, or it became PENDING."""
    if status == RunStatus.RUNNING and lease_expires_at is not None:
        return lease_expires_at
    if status == RunStatus.WAITING_RETRY and next_attempt_at is not None:
        return next_attempt_at
    return updated_at


def sweep(limit: int = 1000) -> list[UUID]:
    """Wake parked runs whose timer is due, re-enqueue every run that is due; returns their ids."""
    woken = wakes.wake_due(limit)
    ids = due_runs(limit)
    if ids:
        Run.objects.filter(id__in=ids).update(enqueued_at=timezone.now())
    for run_id in ids:
        dispatch.enqueue(run_id)
    return woken + ids


@dataclass(frozen=True)
class SweepTask:
    """Work an app adds to each beat: `run` returns how many things it settled, `done` says it ("expired {}
    approval(s)"). Tasks run in `order`, before the runs are re-sent, so a run they wake goes in the same beat."""

    order: int
    run: Callable[[], int]
    done: str


_tasks: dict[str, SweepTask] = {}


def add_to_sweep(name: str, task: SweepTask) -> None:
    """Called from an app's ready(); the name keeps a second registration from running the work twice."""
    _tasks[name] = task


@dataclass(frozen=True)
class SweepReport:
    settled: tuple[tuple[SweepTask, int], ...]  # what each app's task did
    enqueued: int
    notifications: int = 0  # deliveries (digests included) sent to the workers

    def __str__(self) -> str:
        return ", ".join([*(task.done.format(count) for task, count in self.settled),
                          f"re-enqueued {self.enqueued} run(s)",
                          f"sent {self.notifications} notification(s) to the workers"])


def sweep_all() -> SweepReport:
    """One beat of the sweeper: the apps' tasks (settle stale operations, expire approvals), then re-send due
    runs and due notifications."""
    settled = tuple((task, task.run()) for task in sorted(_tasks.values(), key=lambda task: task.order))
    enqueued = len(sweep())
    notified = notifications.sweep()
    return SweepReport(settled, enqueued, notified.digests + notified.resent)


def turn_scope() -> str:
    """The sweep turn this process takes part in: production's, or its tool's own (durable/scope.py)."""
    owner = scoped_to()
    return "production" if owner is None else f"created_by:{owner}"


def take_turn(owner: str, period: float, scope: str | None = None) -> bool:
    """Whether this process sweeps now: one conditional UPDATE, won by one process per period across all.

    A sweep that outlasts the period may overlap the next one; that is harmless, since every move a
    sweep makes is a conditional write or a message whose duplicates the lease absorbs. `scope` names
    another turn taken the same way (the daily retention pass); unset, this process's sweep turn.
    """
    now, scope = timezone.now(), scope or turn_scope()
    due = SweepTurn.objects.filter(scope=scope, due_at__lte=now)
    if due.update(due_at=now + timedelta(seconds=period), taken_by=owner):
        return True
    if SweepTurn.objects.filter(scope=scope).exists():
        return False
    try:  # the first sweep against this database (or of this tool's scope)
        SweepTurn.objects.create(scope=scope, due_at=now + timedelta(seconds=period), taken_by=owner)
    except IntegrityError:  # another worker made the row first, and swept
        return False
    return True
