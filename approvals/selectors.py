"""Queries the API and the console share: one place for what the inbox filters mean."""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

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
