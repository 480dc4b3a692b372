"""What the console's runs list reads: one page of runs (the overview's queries: durable/console/overview.py)."""
from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet

from durable.api.filters import ORDERS
from durable.models import Run

# What a WAITING run's row says it waits for (waiting_for, next_attempt_at) is on the row too: no query per row.
LISTED = ("id", "workflow_name", "workflow_version", "business_key", "status", "current_step", "created_at",
          "waiting_for", "next_attempt_at", "input_tokens", "output_tokens", "cost", "unpriced_tokens")


def runs_page(queryset: QuerySet[Run], after: tuple[Any, UUID] | None, size: int, order: str = "newest") -> list[Run]:
    """Up to `size` + 1 runs after the page marker, in the list's order (newest first: the run_created index's).

    The extra run only tells the caller there is another page.
    """
    listed = runs_after(queryset, after, order).only(*LISTED)  # not the input, state or error JSON
    return list(listed[:size + 1])


def runs_after(queryset: QuerySet[Run], after: tuple[Any, UUID] | None, order: str = "newest") -> QuerySet[Run]:
    """The runs after the page marker, in the list's order: (-created_at, -id), (-cost, -id) or (-tokens, -id)."""
    key, _ = ORDERS[order]
    field = key.lstrip("-")
    if after is not None:
        value, run_id = after
        queryset = queryset.filter(Q(**{f"{field}__lt": value}) | Q(**{field: value, "id__lt": run_id}))
    return queryset.order_by(*ORDERS[order])
