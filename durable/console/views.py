"""Console views: a view parses input, calls a selector, renders."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from durable.api.filters import RunFilterSerializer, filter_runs
from durable.engine.states import RunStatus
from durable.models import Run

PAGE = 50


@login_required
@permission_required("durable.view_run", raise_exception=True)
def runs(request: HttpRequest) -> HttpResponse:
    filters = RunFilterSerializer(data={k: v for k, v in request.GET.items() if v})
    # A bad filter shows its error and no runs, rather than every run as if unfiltered.
    queryset = filter_runs(Run.objects.all(), filters.validated_data) if filters.is_valid() else Run.objects.none()
    context = {
        "runs": queryset[:PAGE],
        "filters": request.GET,
        "errors": filters.errors,
        "statuses": list(RunStatus),
    }
    template = "durable/_run_rows.html" if request.htmx else "durable/runs.html"
    return render(request, template, context)


@login_required
@permission_required("durable.view_run", raise_exception=True)
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    run = get_object_or_404(Run, id=run_id)
    context = {
        "run": run,
        "checkpoints": run.checkpoints.order_by("seq"),
        "journal": run.journal.order_by("created_at", "id"),
        "side_effects": run.side_effects.all(),
        "actions": run.operator_actions.select_related("actor"),
        "approvals": run.approvals.order_by("created_at", "ask"),
    }
    return render(request, "durable/run_detail.html", context)
