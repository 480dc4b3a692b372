"""Queries the reconciliation screens read: what waits for reconciliation, and one operation's history."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.ledger import OperationStatus as Op
from durable.models import JournalEntry, OperatorAction, SideEffect

LEDGER_KINDS = [JournalEntry.Kind.SIDE_EFFECT, JournalEntry.Kind.RECONCILIATION, JournalEntry.Kind.NEEDS_ATTENTION]


def awaiting_reconciliation(limit: int, after: tuple[datetime, str] | None = None) -> list[SideEffect]:
    """UNKNOWN operations and those STARTED for longer than the reconciler waits, longest waiting first, from
    just after the (updated_at, operation id) marker `after`.

    Up to `limit` + 1 rows: the extra one only tells the caller that there are more.
    """
    return list(_after(_waiting(), after).select_related("run")[:limit + 1])


def _waiting() -> QuerySet[SideEffect]:
    cutoff = timezone.now() - timedelta(seconds=durable_settings.DURABLE_RECONCILE_AFTER_SECONDS)
    waiting = Q(status=Op.UNKNOWN) | Q(status=Op.STARTED, updated_at__lt=cutoff)
    return SideEffect.objects.filter(waiting).order_by("updated_at", "operation_id")


def _after(waiting: QuerySet[SideEffect], after: tuple[datetime, str] | None) -> QuerySet[SideEffect]:
    if after is None:
        return waiting
    updated_at, operation_id = after
    return waiting.filter(Q(updated_at__gt=updated_at) | Q(updated_at=updated_at, operation_id__gt=operation_id))


def queue_state(limit: int, after: tuple[datetime, str] | None = None) -> Any:
    """What a live queue's version reads: the rows it shows, by their last change and their run's status."""
    rows = _after(_waiting(), after).values_list("operation_id", "status", "updated_at", "run__status")
    return list(rows[:limit + 1])


def operation_state(operation_id: str) -> Any:
    """What a live operation page's version reads: the ledger row, its run's status and newest journal entry,
    and how many operator actions the audit trail holds about it."""
    row = SideEffect.objects.filter(operation_id=operation_id).annotate(
        journal=Subquery(JournalEntry.objects.filter(run_id=OuterRef("run_id")).order_by()
                         .values("run_id").annotate(latest=Max("id")).values("latest")),
        actions=Subquery(OperatorAction.objects.filter(operation_id=OuterRef("operation_id")).order_by()
                         .values("operation_id").annotate(n=Count("*")).values("n")))
    return row.values_list("status", "updated_at", "resolved_at", "run__status", "journal", "actions").first()


def operation_journal(operation: SideEffect) -> QuerySet[JournalEntry]:
    """The run's journal entries about this operation: those naming it, and its step's ledger events."""
    about = Q(detail__operation_id=operation.operation_id) | Q(step=operation.step, kind__in=LEDGER_KINDS)
    return JournalEntry.objects.filter(about, run_id=operation.run_id).order_by("created_at", "id")


def operation_actions(operation: SideEffect) -> QuerySet[OperatorAction]:
    """What operators did to this operation, from the audit trail."""
    return OperatorAction.objects.filter(operation_id=operation.operation_id).select_related("actor")
