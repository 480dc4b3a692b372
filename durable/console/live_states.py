"""What each live run screen's version reads (durable/console/live.py): a few columns, never the contents."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from django.db.models import Max, OuterRef, Subquery
from django.http import HttpRequest

from durable.console import selectors
from durable.console.forms import RunsQuery, filter_console_runs
from durable.models import Checkpoint, JournalEntry, Run, SideEffect


def _latest(model: type[JournalEntry] | type[Checkpoint] | type[SideEffect], field: str) -> Subquery:
    """The newest `field` of the run's rows in `model` (append-only tables grow; the ledger's rows change)."""
    rows = model.objects.filter(run_id=OuterRef("id")).order_by().values("run_id")
    return Subquery(rows.annotate(latest=Max(field)).values("latest"))


def _children_changed() -> Subquery:
    """The last change of any of the run's child runs (index on parent_run): their statuses are on its page."""
    children = Run.objects.filter(parent_run_id=OuterRef("id")).order_by().values("parent_run_id")
    return Subquery(children.annotate(latest=Max("updated_at")).values("latest"))


def run_state(request: HttpRequest, run_id: UUID) -> Any:
    """One query: the run's row, its newest journal entry and checkpoint, its ledger's and its children's last
    change.

    Every decision, expiry, wait, event received and step writes one of them, so the run's page changes only
    when this does (the time left of a wait is as of the last change; its due time is shown beside it).
    """
    run = Run.objects.filter(id=run_id).annotate(
        last_entry=_latest(JournalEntry, "id"), last_checkpoint=_latest(Checkpoint, "seq"),
        last_ledger_change=_latest(SideEffect, "updated_at"), last_child_change=_children_changed())
    return run.values_list("status", "updated_at", "fencing_token", "last_entry", "last_checkpoint",
                           "last_ledger_change", "last_child_change").first()


def runs_state(size: int) -> Callable[[HttpRequest], Any]:
    """The state of the runs list showing `size` runs a page."""
    def state(request: HttpRequest) -> Any:
        """The rows the list shows now (id, status, step, last change), read in the order the page reads them."""
        query = RunsQuery(data={k: v for k, v in request.GET.items() if v})
        if not query.is_valid() or "q" in query.validated_data:
            return None  # an error or a search: the page shows no rows that can change
        params = query.validated_data
        runs = selectors.runs_after(filter_console_runs(Run.objects.all(), params), params.get("after"),
                                    params.get("order") or "newest")
        return list(runs.values_list("id", "status", "current_step", "updated_at", "cost", "input_tokens",
                                     "output_tokens")[:size + 1])
    return state
