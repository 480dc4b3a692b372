"""The sweeper: finds runs a worker must pick up again and re-enqueues them.

It also expires approvals past their deadline and settles stale operations.
Messages can be lost or duplicated; the database is what says what must run. A run whose
lease expired (its worker died), whose retry is due, or that sat PENDING past a grace
period (its message was lost) is sent again. Duplicates are harmless: the lease decides.
A run is re-sent at most once per grace period, so a backlog is not flooded with copies.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from durable import dispatch
from durable.engine.states import RunStatus
from durable.models import Run


def due_runs(limit: int = 1000) -> list[UUID]:
    now = timezone.now()
    grace = now - timedelta(seconds=settings.DURABLE_PENDING_GRACE_SECONDS)
    due = (
        Q(status=RunStatus.RUNNING, lease_expires_at__lt=now)
        | Q(status=RunStatus.WAITING_RETRY, next_attempt_at__lte=now)
        | Q(status=RunStatus.PENDING, updated_at__lt=grace)
    )
    not_just_sent = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=grace)
    return list(Run.objects.filter(due & not_just_sent).order_by("updated_at").values_list("id", flat=True)[:limit])


def sweep(limit: int = 1000) -> list[UUID]:
    """Re-enqueue every run that is due; returns their ids."""
    ids = due_runs(limit)
    if ids:
        Run.objects.filter(id__in=ids).update(enqueued_at=timezone.now())
    for run_id in ids:
        dispatch.enqueue(run_id)
    return ids


@dataclass(frozen=True)
class SweepReport:
    reconciled: int
    expired_approvals: int
    enqueued: int

    def __str__(self) -> str:
        return (f"reconciled {self.reconciled} stale operation(s), expired {self.expired_approvals} approval(s), "
                f"re-enqueued {self.enqueued} run(s)")


def sweep_all() -> SweepReport:
    """One beat of the sweeper: settle stale operations, expire approvals, re-send due runs."""
    from approvals.services import expire_due  # the apps that build on the core
    from reconciliation.sweeper import reconcile_stale

    reconciled = reconcile_stale()
    expired = expire_due()
    return SweepReport(reconciled, len(expired), len(sweep()))
