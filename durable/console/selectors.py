"""What the console's runs list reads: one page of runs (the overview's queries: durable/console/overview.py)."""
from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.db.models import Q, QuerySet

from durable.models import Run

# What a WAITING run's row says it waits for (waiting_for, next_attempt_at) is on the row too: no query per row.
LISTED = ("id", "workflow_name", "workflow_version", "business_key", "status", "current_step", "created_at",
          "waiting_for", "next_attempt_at")


def runs_page(queryset: QuerySet[Run], after: tuple[datetime, UUID] | None, size: int) -> list[Run]:
    """Up to `size` + 1 runs after the page marker, newest first (the run_created index's order).

    The extra run only tells the caller there is another page.
    """
    listed = runs_after(queryset, after).only(*LISTED)  # not the input, state or error JSON
    return list(listed[:size + 1])


def runs_after(queryset: QuerySet[Run], after: tuple[datetime, UUID] | None) -> QuerySet[Run]:
    """The runs after the page marker, newest first (the run_created index's order)."""
    if after is not None:
        created_at, run_id = after
        queryset = queryset.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=run_id))
    return queryset.order_by("-created_at", "-id")
