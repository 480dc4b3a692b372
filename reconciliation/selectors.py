"""Queries the reconciliation screens read: what waits for reconciliation, and one operation's history."""
from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.ledger import OperationStatus as Op
from durable.models import JournalEntry, OperatorAction, SideEffect

LEDGER_KINDS = [JournalEntry.Kind.SIDE_EFFECT, JournalEntry.Kind.RECONCILIATION, JournalEntry.Kind.NEEDS_ATTENTION]


def awaiting_reconciliation(limit: int) -> list[SideEffect]:
    """UNKNOWN operations and those STARTED for longer than the reconciler waits, longest waiting first.

    Up to `limit` + 1 rows: the extra one only tells the caller that there are more.
    """
    cutoff = timezone.now() - timedelta(seconds=durable_settings.DURABLE_RECONCILE_AFTER_SECONDS)
    waiting = Q(status=Op.UNKNOWN) | Q(status=Op.STARTED, updated_at__lt=cutoff)
    return list(SideEffect.objects.filter(waiting).select_related("run")
                .order_by("updated_at", "operation_id")[:limit + 1])


def operation_journal(operation: SideEffect) -> QuerySet[JournalEntry]:
    """The run's journal entries about this operation: those naming it, and its step's ledger events."""
    about = Q(detail__operation_id=operation.operation_id) | Q(step=operation.step, kind__in=LEDGER_KINDS)
    return JournalEntry.objects.filter(about, run_id=operation.run_id).order_by("created_at", "id")


def operation_actions(operation: SideEffect) -> QuerySet[OperatorAction]:
    """What operators did to this operation, from the audit trail."""
    return OperatorAction.objects.filter(operation_id=operation.operation_id).select_related("actor")
