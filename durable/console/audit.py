"""The audit trail screens: every operator action, newest first, filtered, paged, and exported as CSV.

The trail is append-only: these views only read it, and no view edits or deletes an action.
"""
from __future__ import annotations

import csv
import json
from datetime import date, datetime, time, timedelta
from itertools import chain
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe

from durable.console.paging import page_marker, read_page_marker
from durable.console.rendering import fragment_or_page, next_page_link
from durable.console.requests import ConsoleRequest
from durable.console.spreadsheet import inert
from durable.labels import LabelledForm
from durable.models import OperatorAction
from durable.permissions import can_see_contents, permission_required

VIEW = "durable.view_operatoraction"
CONTENTS_HIDDEN = "(hidden: the ledger's contents need view_checkpoint, view_journalentry and view_sideeffect)"
PAGE = 100
LOOKUPS = {"actor": "actor_username", "action": "action", "source": "source", "run": "run_id",
           "operation_id": "operation_id", "bulk": "detail__bulk_id"}
CSV_COLUMNS = ["when", "actor", "action", "run", "operation_id", "source", "status_before", "status_after",
               "reason", "detail"]


class AuditFilters(LabelledForm, forms.Form):
    actor = forms.CharField(max_length=150, required=False, help_text="username")
    action = forms.CharField(max_length=50, required=False, widget=forms.TextInput(
        attrs={"placeholder": "e.g. resolve_operation"}))
    source = forms.CharField(max_length=50, required=False, widget=forms.TextInput(
        attrs={"placeholder": "console, api, command"}))
    run = forms.UUIDField(required=False)
    operation_id = forms.RegexField(r"^[0-9a-f]{32}$", required=False, error_messages={
        "invalid": "an operation id is 32 lowercase hexadecimal characters"})
    bulk = forms.RegexField(r"^[0-9a-f]{32}$", required=False, label="Bulk id", error_messages={
        "invalid": "a bulk id is 32 lowercase hexadecimal characters, as a bulk action's result shows it"})
    since = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_after(self) -> tuple[datetime, int] | None:
        value = self.cleaned_data["after"]
        if not value:
            return None
        marker = read_page_marker(value, _action_id)  # (created_at, action id)
        if marker is None:
            raise forms.ValidationError("not a page of this trail; start again from the first page")
        return marker

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data  # Form.clean returns it; an override may return None
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            raise forms.ValidationError("'From' is after 'To': no action can fall in that range")
        return cleaned

    def trail(self) -> QuerySet[OperatorAction]:
        """The actions these filters select, newest first, from the first page on."""
        data = self.cleaned_data
        queryset = OperatorAction.objects.filter(
            **{lookup: data[name] for name, lookup in LOOKUPS.items() if data[name] not in (None, "")})
        if data["since"]:
            queryset = queryset.filter(created_at__gte=_start_of(data["since"]))
        if data["until"]:
            queryset = queryset.filter(created_at__lt=_start_of(data["until"] + timedelta(days=1)))
        return queryset.order_by("-created_at", "-id")

    def page(self) -> list[OperatorAction]:
        """Up to PAGE + 1 actions after the page marker; the extra one only says there is a next page."""
        queryset = self.trail()
        if self.cleaned_data["after"] is not None:
            when, action_id = self.cleaned_data["after"]
            queryset = queryset.filter(Q(created_at__lt=when) | Q(created_at=when, id__lt=action_id))
        return list(queryset[:PAGE + 1])


def _start_of(day: date) -> datetime:
    """Midnight of `day` where the console's users are, so a date range means their calendar days."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


@login_required
@permission_required(VIEW)
@require_safe
def trail(request: ConsoleRequest) -> HttpResponse:
    filters = AuditFilters(request.GET)
    # A bad filter shows its error and no actions, rather than the whole trail as if unfiltered.
    found = filters.page() if filters.is_valid() else []
    if not can_see_contents(request.user):
        found = [_without_contents(action) for action in found]
    context = {
        "filters": filters,
        "actions": found[:PAGE],
        "errors": filters.errors,
        "next_page": next_page_link(request, reverse("audit:trail"), found, PAGE, _marker),
        "export_url": _export_url(request),
    }
    return fragment_or_page(request, "durable/audit/_rows.html", "durable/audit/trail.html", context)


def _marker(action: OperatorAction) -> str:
    return page_marker(action.created_at, action.id)


def _action_id(value: str) -> int:
    if not value.isdigit():  # int() would also take " 7" and "-7"
        raise ValueError(value)
    return int(value)


def _export_url(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("after", None)  # the export holds every matching action, not one page
    return f"{reverse('audit:export')}?{query.urlencode()}" if query else reverse("audit:export")


@login_required
@permission_required(VIEW)
@require_safe
def export(request: HttpRequest) -> HttpResponseBase:
    filters = AuditFilters(request.GET)
    if not filters.is_valid():
        return HttpResponseBadRequest(f"Nothing was exported; correct the filters:\n{filters.errors.as_text()}\n",
                                      content_type="text/plain; charset=utf-8")
    writer = csv.writer(_Echo(), quoting=csv.QUOTE_ALL)  # every field quoted: a separator inside stays inside
    actions = filters.trail().iterator(chunk_size=1000)
    if not can_see_contents(request.user):
        actions = map(_without_contents, actions)
    lines = chain([CSV_COLUMNS], map(_csv_line, actions))
    # Streamed: a long trail is written as it is read, never held whole in memory.
    response = StreamingHttpResponse((writer.writerow(line) for line in lines), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-trail-{timezone.now():%Y%m%d-%H%M%S}.csv"'
    return response


def _without_contents(action: OperatorAction) -> OperatorAction:
    """An entry about an operation repeats its ledger row's resolution (the evidence as reason, the external
    reference in detail): that is the ledger's contents, so the contents rule decides, here as everywhere."""
    if action.operation_id:
        action.reason, action.detail = CONTENTS_HIDDEN, None  # shown only; the trail refuses any save
    return action


class _Echo:
    """A file-like object whose write() hands back the line, so csv.writer can feed a stream."""

    def write(self, value: str) -> str:
        return value


def _csv_line(action: OperatorAction) -> list[str]:
    detail = json.dumps(action.detail, sort_keys=True) if action.detail is not None else ""
    values = [action.created_at.isoformat(), action.actor_username, action.action,
              str(action.run_id or ""), action.operation_id, action.source, action.status_before,
              action.status_after, action.reason, detail]
    return [inert(value) for value in values]
