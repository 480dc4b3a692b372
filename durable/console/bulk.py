"""The console's bulk cancel and retry: choose runs (ticked on the runs list, or all runs matching its filter),
confirm seeing how many and which, then act on exactly the runs confirmed, each in the status it was seen in.

The confirmation is a GET (it writes nothing); the action a POST carrying the confirmed runs and their statuses.
The rules are the single-run ones: durable/bulk.py applies the same services, with the same permission checked
here as the run page's action checks (durable/console/actions.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from uuid import UUID

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from durable import bulk
from durable.conf import durable_settings
from durable.console.actions import ACTIONS
from durable.console.fields import TOO_LONG, ReasonField
from durable.console.forms import ConsoleRunFilter, filter_console_runs
from durable.engine.states import RunStatus
from durable.errors import InvalidInput
from durable.labels import LabelledForm
from durable.models import Run
from durable.permissions import permission_required

VIEW = "durable.view_run"
SHOWN = 20  # runs listed per outcome before "and N more"
BY_FILTER = "filter"


LABELS = {bulk.NOT_APPLICABLE: "Not applicable, left as they are", bulk.SKIPPED: "Skipped: changed since you "
          "confirmed, left alone", bulk.NOT_FOUND: "Not found"}


@dataclass(frozen=True)
class Shown:
    """Up to SHOWN items of a list, and how many more there are."""

    label: str
    items: list[Any]
    more: int
    total: int


def shown(label: str, items: list[Any] | tuple[Any, ...]) -> Shown:
    return Shown(label, list(items[:SHOWN]), max(len(items) - SHOWN, 0), len(items))


def outcome_lists(result: bulk.BulkResult) -> list[Shown]:
    """Each outcome with its runs, the applied first; empty outcomes left out."""
    applied = f"Will be {result.action.done}" if result.dry_run else result.action.done.capitalize()
    labels = {result.action.would if result.dry_run else result.action.done: applied, **LABELS}
    return [shown(labels[name], result.of(name)) for name in result.outcome_names() if result.of(name)]


class BulkForm(LabelledForm, forms.Form):
    # The runs confirmed, each with the status it was seen in: "<run id>:<STATUS>", space-separated.
    runs = forms.CharField(widget=forms.HiddenInput)
    reason = ReasonField(required=True, error_messages={
        "required": "give a reason: it is recorded on each run's audit row; nothing was done", "max_length": TOO_LONG})
    confirm = forms.BooleanField(error_messages={"required": "tick “I confirm” to go ahead; nothing was done"})

    def clean_runs(self) -> dict[UUID, str]:
        confirmed: dict[UUID, str] = {}
        for item in self.cleaned_data["runs"].split():
            run_id, _, status = item.partition(":")
            try:
                confirmed[UUID(run_id)] = RunStatus(status).value
            except ValueError:
                raise forms.ValidationError("not a list of runs from a confirmation page; choose the runs again") from None
        limit = durable_settings.DURABLE_BULK_LIMIT
        if len(confirmed) > limit:
            raise forms.ValidationError(bulk.too_many("runs", f"{len(confirmed)} runs were chosen",
                                                      limit).errors["runs"])
        return confirmed

    @staticmethod
    def encode(planned: bulk.BulkResult) -> str:
        return " ".join(f"{o.run_id}:{o.status}" for o in planned.applied)


def offered(user: Any) -> list[Any]:
    """The bulk actions this user may take: those whose single-run action they may."""
    return [ACTIONS[name] for name in bulk.BULK_ACTIONS if user.has_perm(ACTIONS[name].permission)]


def filter_query(request: HttpRequest) -> str:
    """The runs list's filters as a bulk selection's query: every run matching them, from the first page."""
    query = request.GET.copy()
    for name in ("after", "q", "by", "order"):
        query.pop(name, None)
    for name in [name for name, value in query.items() if not value]:
        query.pop(name)
    query["by"] = BY_FILTER
    return query.urlencode()


@login_required
@permission_required(VIEW)
@require_http_methods(["GET", "HEAD", "POST"])
def bulk_action(request: HttpRequest, action: str) -> HttpResponse:
    spec = ACTIONS[action]  # the URLs name only bulk actions; the permission is the single-run action's
    if not request.user.has_perm(spec.permission):
        raise PermissionDenied(f"you may not {action} runs")
    if request.method == "POST":
        return _perform(request, action)
    return _confirm(request, action)


def _confirm(request: HttpRequest, action: str) -> HttpResponse:
    """How many runs and which: those the action applies to, and those it does not (with why)."""
    if "run" not in request.GET and request.GET.get("by") != BY_FILTER:
        return _page(request, "durable/bulk_confirm.html", action)  # nothing chosen yet: how to choose
    try:
        selection, described = _selection(request)
        planned = bulk.plan(action=action, selection=selection)
    except InvalidInput as exc:
        return _refused(request, action, exc.errors)
    form = BulkForm(initial={"runs": BulkForm.encode(planned)})
    return _page(request, "durable/bulk_confirm.html", action, planned=planned, form=form, described=described)


def _perform(request: HttpRequest, action: str) -> HttpResponse:
    form = BulkForm(request.POST)
    if not form.is_valid():
        if "runs" not in form.cleaned_data:
            return _refused(request, action, form.errors)
        planned = bulk.plan(action=action, selection=bulk.Selection.by_ids(list(form.cleaned_data["runs"])))
        return _page(request, "durable/bulk_confirm.html", action, status=HTTPStatus.BAD_REQUEST, planned=planned,
                     form=form, described="")
    confirmed = form.cleaned_data["runs"]
    result = bulk.perform(action=action, selection=bulk.Selection.by_ids(list(confirmed)), user=request.user,
                          source="console", reason=form.cleaned_data["reason"], confirmed=confirmed)
    return _page(request, "durable/bulk_result.html", action, result=result)


def _selection(request: HttpRequest) -> tuple[bulk.Selection, str]:
    """The runs chosen: all matching the runs list's filters (by=filter), or those ticked (run=<id>, repeated)."""
    if request.GET.get("by") == BY_FILTER:
        filters = ConsoleRunFilter(data={k: v for k, v in request.GET.items() if v and k != "by"})
        if not filters.is_valid():
            raise InvalidInput(filters.errors)
        params = filters.validated_data
        described = ", ".join(f"{name.replace('_', ' ')} {_shown(value)}" for name, value in params.items())
        return bulk.Selection.by_filter(filter_console_runs(Run.objects.all(), params)), described or "every run"
    ticked = request.GET.getlist("run")
    try:
        return bulk.Selection.by_ids([UUID(value) for value in ticked]), ""
    except ValueError:
        raise InvalidInput({"run": ["not a run id; choose the runs again from the runs list"]}) from None


def _shown(value: Any) -> str:
    return ", ".join(value) if isinstance(value, list) else str(value)


def _refused(request: HttpRequest, action: str, errors: dict[str, Any]) -> HttpResponse:
    messages = [str(message) for field_errors in errors.values() for message in field_errors]
    return _page(request, "durable/bulk_confirm.html", action, status=HTTPStatus.BAD_REQUEST, refused=messages)


def _page(request: HttpRequest, template: str, action: str, status: int = HTTPStatus.OK,
          **context: Any) -> HttpResponse:
    result = context.get("result") or context.get("planned")
    if result is not None:
        context.update(outcomes=outcome_lists(result), happened=shown("", result.happened),
                       in_flight=shown("", result.may_have_happened))
    return render(request, template, {"action": ACTIONS[action], "limit": durable_settings.DURABLE_BULK_LIMIT,
                                      **context}, status=status)
