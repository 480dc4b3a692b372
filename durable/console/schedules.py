"""The Schedules page: every schedule with its cron expression and time zone, next fire time, last run and what its
last look did (docs/operations.md, "Schedules"). Read here; changed through the API, audited."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from durable.console.requests import ConsoleRequest
from durable.models import Schedule
from durable.permissions import permission_required

VIEW_SCHEDULE = "durable.view_schedule"
SHOWN = 500  # schedules are few; past this many, the API pages through them


@login_required
@permission_required(VIEW_SCHEDULE)
@require_safe
def schedules(request: ConsoleRequest) -> HttpResponse:
    rows = list(Schedule.objects.select_related("last_run").order_by("name")[:SHOWN + 1])
    return render(request, "durable/schedules.html", {"schedules": rows[:SHOWN], "more": len(rows) > SHOWN})
