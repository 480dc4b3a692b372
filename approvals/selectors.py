"""Queries the API and the console share: one place for what the inbox filters mean."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Count, Min, Q, QuerySet

from approvals.models import ApprovalRequest
from durable.engine.approvals import ApprovalStatus

LOOKUPS = {"status": "status", "kind": "kind", "workflow": "workflow_name", "version": "workflow_version",
           "business_key": "business_key", "run": "run_id"}


def filter_requests(queryset: QuerySet[ApprovalRequest], filters: dict[str, Any]) -> QuerySet[ApprovalRequest]:
    """Validated filters applied; PENDING unless a status is asked for (the inbox)."""
    filters = {"status": ApprovalStatus.PENDING, **{k: v for k, v in filters.items() if v not in (None, "")}}
    return queryset.filter(**{LOOKUPS[k]: v for k, v in filters.items()})


def pending_count() -> int:
    return ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count()


@dataclass(frozen=True)
class PendingSummary:
    """How many requests wait for a human, since when, and the soonest expiry: one aggregate."""

    count: int
    oldest_created_at: datetime | None
    soonest_expiry: datetime | None


def pending_summary() -> PendingSummary:
    found = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).aggregate(
        count=Count("*"), oldest=Min("created_at"), soonest=Min("expires_at"))
    return PendingSummary(found["count"], found["oldest"], found["soonest"])


def stuck_count(*, older_than: datetime, expiring_before: datetime) -> int:
    """Pending requests asked before `older_than` or expiring before `expiring_before`."""
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    return pending.filter(Q(created_at__lt=older_than) | Q(expires_at__lt=expiring_before)).count()


def inbox_page(filters: dict[str, Any], after: tuple[datetime, UUID] | None, size: int) -> list[ApprovalRequest]:
    """Up to `size` + 1 pending requests after the page marker, soonest expiry first (the partial index's order).

    The extra row only tells the caller there is another page.
    """
    queryset = filter_requests(ApprovalRequest.objects.all(), filters)
    if after is not None:
        expires_at, request_id = after
        queryset = queryset.filter(Q(expires_at__gt=expires_at) | Q(expires_at=expires_at, id__gt=request_id))
    listed = queryset.order_by("expires_at", "id").defer("snapshot", "last_check")  # the rows show neither
    return list(listed[:size + 1])


def newer_ask(request: ApprovalRequest) -> ApprovalRequest | None:
    """The request that replaced this one when the run asked again, if it did."""
    return (ApprovalRequest.objects.filter(run_id=request.run_id, step=request.step, ask__gt=request.ask)
            .order_by("-ask").first())
