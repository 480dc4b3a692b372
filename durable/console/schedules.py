"""The Schedules screens: every schedule with its cron expression and time zone, next fire time, last run and what
its last look did (docs/operations.md, "Schedules"); one schedule's next fire times and runs; and, for a holder of
durable.manage_schedule, a new schedule, an edit, pause, resume and delete, each through durable/schedules.py
(audited there). A schedule declared in code is owned by its code: paused and resumed here, never edited or deleted."""
from __future__ import annotations

import json
from datetime import datetime
from http import HTTPStatus
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from durable import schedules as service
from durable.console.requests import ConsoleRequest
from durable.console.schedule_forms import DeleteScheduleForm, ScheduleForm
from durable.console.timezones import known_zones
from durable.crons import parse_cron
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import Run, Schedule
from durable.permissions import permission_required
from durable.store import store

VIEW_SCHEDULE, MANAGE_SCHEDULE = "durable.view_schedule", service.MANAGE_SCHEDULE
SHOWN = 500  # schedules are few; past this many, the API pages through them
NEXT_SHOWN, RUNS_SHOWN = 3, 10


@login_required
@permission_required(VIEW_SCHEDULE)
@require_safe
def schedules(request: ConsoleRequest) -> HttpResponse:
    rows = list(Schedule.objects.select_related("last_run").order_by("name")[:SHOWN + 1])
    return render(request, "durable/schedules.html", {"schedules": rows[:SHOWN], "more": len(rows) > SHOWN})


@login_required
@permission_required(VIEW_SCHEDULE)
@require_safe
def schedule_detail(request: ConsoleRequest, schedule_id: UUID) -> HttpResponse:
    return _detail(request, get_object_or_404(Schedule, id=schedule_id))


def _detail(request: ConsoleRequest, schedule: Schedule, *, status: int = HTTPStatus.OK,
            **context: Any) -> HttpResponse:
    runs = Run.objects.filter(workflow_name=schedule.workflow,
                              idempotency_key__startswith=f"schedule:{schedule.id}:").order_by("-created_at")
    context = {"schedule": schedule, "next_fire_times": next_fire_times(schedule, store().db_now()),
               "runs": runs[:RUNS_SHOWN], "may_manage": request.user.has_perm(MANAGE_SCHEDULE),
               "input": json.dumps(schedule.input), "delete_form": DeleteScheduleForm(), **context}
    return render(request, "durable/schedule_detail.html", context, status=status)


def next_fire_times(schedule: Schedule, now: datetime, count: int = NEXT_SHOWN) -> list[datetime]:
    """The schedule's next fire times, in its own time zone: from its next fire time (a paused one's from now,
    where a resume takes it up)."""
    cron = parse_cron(schedule.cron, schedule.time_zone)
    at = schedule.next_fire_at if schedule.next_fire_at and not schedule.paused else cron.next_after(now)
    times = [at]
    while len(times) < count:
        times.append(cron.next_after(times[-1]))
    return [time.astimezone(cron.zone) for time in times]


@login_required
@permission_required(MANAGE_SCHEDULE)
@require_http_methods(["GET", "HEAD", "POST"])
def schedule_new(request: ConsoleRequest) -> HttpResponse:
    if request.method != "POST":
        return _form(request, ScheduleForm())
    form = ScheduleForm(request.POST)
    if not form.is_valid():
        return _form(request, form, status=HTTPStatus.BAD_REQUEST)
    try:
        schedule = service.create(user=request.user, **form.cleaned_data)
    except InvalidInput as exc:
        form.service_errors(exc)
        return _form(request, form, status=HTTPStatus.BAD_REQUEST)
    except Conflict as exc:
        form.add_error("name", str(exc))
        return _form(request, form, status=HTTPStatus.CONFLICT)
    messages.success(request, f"Schedule {schedule.name} made: {'paused' if schedule.paused else 'it fires'} "
                              "from its next fire time.")
    return redirect("durable:schedule-detail", schedule.id)


@login_required
@permission_required(MANAGE_SCHEDULE)
@require_http_methods(["GET", "HEAD", "POST"])
def schedule_edit(request: ConsoleRequest, schedule_id: UUID) -> HttpResponse:
    schedule = get_object_or_404(Schedule, id=schedule_id)
    if schedule.declared_in_code:  # as the service refuses it: the page is not offered either
        raise PermissionDenied(f"schedule {schedule.name} is declared in code with its workflow: change it there "
                               "(it may be paused and resumed here)")
    if request.method != "POST":
        initial = {**{name: getattr(schedule, name) for name in service.EDITABLE},
                   "input": json.dumps(schedule.input, indent=2)}
        return _form(request, ScheduleForm(initial=initial, editing=True), schedule=schedule)
    form = ScheduleForm(request.POST, editing=True)
    if not form.is_valid():
        return _form(request, form, schedule=schedule, status=HTTPStatus.BAD_REQUEST)
    try:
        schedule = service.edit(schedule.id, user=request.user, **form.cleaned_data)
    except InvalidInput as exc:
        form.service_errors(exc)
        return _form(request, form, schedule=schedule, status=HTTPStatus.BAD_REQUEST)
    except Forbidden as exc:  # declared in code since the page was read (a worker wrote its code's schedules)
        raise PermissionDenied(str(exc)) from None
    messages.success(request, f"Schedule {schedule.name} changed; a new expression or time zone counts from now.")
    return redirect("durable:schedule-detail", schedule.id)


def _form(request: ConsoleRequest, form: ScheduleForm, *, schedule: Schedule | None = None,
          status: int = HTTPStatus.OK) -> HttpResponse:
    context: dict[str, Any] = {"form": form, "schedule": schedule, "zones": sorted(known_zones())}
    if status != HTTPStatus.OK:
        context["problem"] = "Nothing was done: correct the form below."
    return render(request, "durable/schedule_form.html", context, status=status)


@login_required
@permission_required(MANAGE_SCHEDULE)
@require_POST
def schedule_pause(request: ConsoleRequest, schedule_id: UUID, *, paused: bool) -> HttpResponse:
    """Pause or resume (any schedule, one declared in code too); a resumed schedule fires from its next fire time
    after now: what passed while it was paused is not caught up."""
    schedule = get_object_or_404(Schedule, id=schedule_id)
    if schedule.paused == paused:  # a page read before someone else's pause or resume
        return _detail(request, schedule, status=HTTPStatus.CONFLICT,
                       problem=f"Nothing was done: the schedule is {'paused' if paused else 'active'} already.")
    schedule = service.edit(schedule.id, user=request.user, paused=paused)
    messages.success(request, f"Schedule {schedule.name} paused: it fires no run until resumed." if paused else
                     f"Schedule {schedule.name} resumed: it fires from its next fire time after now.")
    return redirect("durable:schedule-detail", schedule.id)


@login_required
@permission_required(MANAGE_SCHEDULE)
@require_POST
def schedule_delete(request: ConsoleRequest, schedule_id: UUID) -> HttpResponse:
    schedule = get_object_or_404(Schedule, id=schedule_id)
    if schedule.declared_in_code:
        raise PermissionDenied(f"schedule {schedule.name} is declared in code with its workflow: remove it there, "
                               "or pause it here")
    form = DeleteScheduleForm(request.POST)
    if not form.is_valid():
        return _detail(request, schedule, delete_form=form, status=HTTPStatus.BAD_REQUEST,
                       problem="Nothing was done: correct the form below.")
    try:
        service.delete(schedule.id, user=request.user, reason=form.cleaned_data["reason"])
    except Forbidden as exc:
        raise PermissionDenied(str(exc)) from None
    messages.success(request, f"Schedule {schedule.name} deleted; its runs stay.")
    return redirect("durable:schedules")
