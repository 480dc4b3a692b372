"""The Paused workflows page: the kill switches that are off (docs/operations.md, "Pausing runs"), one turned off
for a workflow or one of its versions, and one turned on again, each behind a reason and an "I confirm" box."""
from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from durable import pauses
from durable.console.forms import ActionForm
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import PauseSwitch, Run
from durable.permissions import permission_required
from durable.registry import registry

VIEW, PAUSE = "durable.view_run", "durable.pause_run"


class PauseWorkflowForm(ActionForm):
    workflow = forms.ChoiceField(choices=())
    version = forms.IntegerField(min_value=1, required=False, help_text="leave empty for every version")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted({wf.name for wf in registry.all()})
        self.fields["workflow"].choices = [(name, name) for name in names]  # type: ignore[attr-defined]


@login_required
@permission_required(VIEW)
@require_http_methods(["GET", "HEAD", "POST"])
def paused(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request, PauseWorkflowForm())
    if not request.user.has_perm(PAUSE):
        raise PermissionDenied(f"pausing a workflow needs the {PAUSE} permission")
    form = PauseWorkflowForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    data = form.cleaned_data
    try:
        switch, runs = pauses.pause_workflow(workflow=data["workflow"], version=data["version"], user=request.user,
                                             source="console", reason=data["reason"])
    except InvalidInput as exc:
        for name, errors in exc.errors.items():
            form.add_error(name if name in form.fields else None, errors)
        return _page(request, form, status=HTTPStatus.BAD_REQUEST)
    except Conflict as exc:
        return _page(request, form, problem=f"Nothing was done: {exc}.", status=HTTPStatus.CONFLICT)
    messages.success(request, f"{switch} for now: {runs} run(s) paused or pausing at their next step boundary; "
                              "new starts are held.")
    return redirect("durable:paused")


@login_required
@permission_required(PAUSE)
@require_POST
def resume(request: HttpRequest, switch_id: int) -> HttpResponse:
    form = ActionForm(request.POST)
    if not form.is_valid():
        return _page(request, PauseWorkflowForm(), resume_errors=form.errors, status=HTTPStatus.BAD_REQUEST)
    switch = get_object_or_404(PauseSwitch, id=switch_id)
    resumed = pauses.resume_workflow(switch_id=switch.id, user=request.user, source="console",
                                     reason=form.cleaned_data["reason"])
    messages.success(request, f"{switch.workflow_name} runs again: {resumed} run(s) resumed where they stopped.")
    return redirect("durable:paused")


def _page(request: HttpRequest, form: PauseWorkflowForm, *, status: int = HTTPStatus.OK, **context: Any
          ) -> HttpResponse:
    context = {"form": form, "switches": PauseSwitch.objects.select_related("created_by"),
               "paused_runs": Run.objects.filter(status=RunStatus.PAUSED).count(),
               "may_pause": request.user.has_perm(PAUSE), "resume_form": ActionForm(), **context}
    if status == HTTPStatus.BAD_REQUEST and "problem" not in context:
        context["problem"] = "Nothing was done: correct the form below."
    return render(request, "durable/paused.html", context, status=status)
