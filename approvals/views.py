"""Approvals console: the inbox, one request beside its current facts, and deciding it.

A view parses input, calls a selector or a service, renders. With htmx the same view
answers with a fragment: the inbox rows, or the decision panel (also on a refusal, with
its 4xx status; base.html's htmx-config tells htmx to swap those).
"""
from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from approvals import services
from approvals.context_processors import VIEW_PERMISSION
from approvals.forms import DecisionForm, InboxFilters
from approvals.models import ApprovalRequest
from approvals.selectors import (
    DEFAULT_TAB,
    TABS,
    earlier_ask,
    inbox_page,
    inbox_state,
    newer_ask,
    request_state,
    with_parent_runs,
)
from durable.console import live
from durable.console.paging import page_marker
from durable.console.rendering import fragment_or_page, next_page_link
from durable.console.requests import ConsoleRequest
from durable.engine.approvals import ApprovalStatus, differences
from durable.errors import Conflict, Forbidden, InvalidInput, ServiceError, Unavailable
from durable.permissions import permission_required, signed_in
from durable.security import refused_because

VIEW, DECIDE = VIEW_PERMISSION, services.DECIDE_PERMISSION
PAGE = 50
REFUSALS: dict[type[ServiceError], HTTPStatus] = {
    InvalidInput: HTTPStatus.BAD_REQUEST,
    Forbidden: HTTPStatus.FORBIDDEN,
    Conflict: HTTPStatus.CONFLICT,
    Unavailable: HTTPStatus.SERVICE_UNAVAILABLE,
}


@dataclass(frozen=True)
class FactRow:
    key: str
    then: Any
    now: Any
    changed: bool


@dataclass(frozen=True)
class Facts:
    """The snapshot beside the current values: read now while the request is open, else its last check."""

    rows: list[FactRow]
    problems: list[str]
    fresh: bool
    unavailable: str = ""  # why the current values could not be read

    @property
    def has_current(self) -> bool:
        return not self.unavailable


@dataclass(frozen=True)
class DecisionOutcome:
    level: str  # "success" or "error"
    message: str
    current: Facts | None = None  # a conflict's current values beside the snapshot
    newer_request: dict[str, Any] | None = None  # the ask that replaced this request


def _inbox_state(request: ConsoleRequest) -> Any:
    filters = InboxFilters(request.GET)
    return inbox_state(signed_in(request.user), filters.filters()) if filters.is_valid() else None


@login_required
@permission_required(VIEW)
@require_safe
@live.live(_inbox_state)
def inbox(request: ConsoleRequest) -> HttpResponse:
    filters = InboxFilters(request.GET)
    tab = filters.cleaned_data.get("tab") or DEFAULT_TAB if filters.is_valid() else DEFAULT_TAB
    # A bad filter shows its error and no requests, rather than every request as if unfiltered.
    found = inbox_page(filters.filters(), filters.cleaned_data["after"], PAGE, tab=tab,
                       user=signed_in(request.user)) if filters.is_valid() else []
    next_page = next_page_link(request, reverse("approvals:inbox"), found, PAGE,
                               lambda last: page_marker(last.expires_at, last.id))
    counts: dict[str, int] = (request.live_state or ({}, None))[0]  # inbox_state's tab counts, read once for the version
    context = {"approvals": with_parent_runs(found[:PAGE]), "filters": request.GET, "errors": filters.errors, "next_page": next_page,
               "tab": tab, "tabs": [(TABS[name], counts.get(name, 0), _tab_link(request, name)) for name in TABS]}
    return fragment_or_page(request, "approvals/_inbox_live.html", "approvals/inbox.html", context)


def _tab_link(request: ConsoleRequest, tab: str) -> str:
    """The inbox on `tab`, with the filters kept and from its first page."""
    query = request.GET.copy()
    query.pop("after", None)
    query["tab"] = tab
    return f"{reverse('approvals:inbox')}?{query.urlencode()}"


@login_required
@permission_required(VIEW)
@require_safe
@live.live(lambda request, request_id: request_state(request_id))
def detail(request: ConsoleRequest, request_id: UUID) -> HttpResponse:
    return fragment_or_page(request, "approvals/_detail_live.html", "approvals/detail.html",
                            _detail_context(request, _approval(request_id)))


@login_required
@permission_required(DECIDE)
@require_POST
def decide(request: ConsoleRequest, request_id: UUID) -> HttpResponse:
    approval = _approval(request_id)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _answer(request, approval, HTTPStatus.BAD_REQUEST, form=form,
                       outcome=DecisionOutcome("error", "Nothing was decided: the form is incomplete."))
    try:
        decided = services.decide(request_id=approval.id, user=signed_in(request.user), source="console", http_request=request,
                                  **form.cleaned_data)
    except tuple(REFUSALS) as exc:
        return _refused(request, approval, form, exc)
    outcome = DecisionOutcome("success", _what_now(decided))
    if request.htmx:
        return _answer(request, decided, HTTPStatus.OK, outcome=outcome)
    messages.success(request, outcome.message)
    return redirect("approvals:detail", decided.id)


def _refused(request: ConsoleRequest, approval: ApprovalRequest, form: DecisionForm, exc: ServiceError) -> HttpResponse:
    status = next(status for kind, status in REFUSALS.items() if isinstance(exc, kind))
    if status == HTTPStatus.FORBIDDEN:
        refused_because(request, str(exc), getattr(exc, "action", ""))
    if isinstance(exc, InvalidInput):
        for name, errors in exc.errors.items():
            form.add_error(name if name in form.fields else None, errors)
        return _answer(request, approval, status, form=form,
                       outcome=DecisionOutcome("error", "Nothing was decided: correct the form and decide again."))
    approval.refresh_from_db()  # a conflict may have closed it (invalidated, decided by someone else)
    extra = exc.extra if isinstance(exc, Conflict) else {}
    current = extra.get("current_values")
    compared = _compare(approval.snapshot, current, [], fresh=True) if current is not None else None
    outcome = DecisionOutcome("error", str(exc), newer_request=extra.get("newer_request"), current=compared)
    # After a refusal the panel offers a reload, not the same form: the approver should look again first.
    retry = isinstance(exc, Unavailable)
    return _answer(request, approval, status, form=form if retry else None, offer_form=retry, outcome=outcome)


def _what_now(decided: ApprovalRequest) -> str:
    if decided.status == ApprovalStatus.APPROVED:
        return "Approved. The run continues; it checks the facts once more before it acts."
    if decided.status == ApprovalStatus.REJECTED:
        return "Rejected. The run stops without acting."
    return (f"Your approval is recorded ({decided.approvals_count} of {decided.approvers_required}); "
            "it still needs another approver.")


def _answer(request: ConsoleRequest, approval: ApprovalRequest, status: HTTPStatus, **panel: Any) -> HttpResponse:
    """The request's live region for htmx (its decision panel and facts now), else the whole page around it,
    with the outcome's status."""
    live.stamp(request, request_state(approval.id))  # the region shows this state: its next poll answers 304
    template = "approvals/_detail_live.html" if request.htmx else "approvals/detail.html"
    return live.tagged(render(request, template, _detail_context(request, approval, **panel), status=status), request)


def _approval(request_id: UUID) -> ApprovalRequest:
    return get_object_or_404(ApprovalRequest.objects.select_related("run", "run__parent_run", "decided_by"),
                             id=request_id)


def _detail_context(request: ConsoleRequest, approval: ApprovalRequest, **panel: Any) -> dict[str, Any]:
    outcome = panel.get("outcome")
    return {
        # A refusal's current values are the facts now: one table, not a second one in the panel.
        "facts": outcome.current if outcome and outcome.current else _facts(approval),
        "newer": newer_ask(approval),
        "earlier": earlier_ask(approval),
        "customer_message": (approval.run.input or {}).get("customer_message", ""),
        **_panel(request, approval, **panel),
    }


def _panel(request: ConsoleRequest, approval: ApprovalRequest, *, form: DecisionForm | None = None,
           outcome: DecisionOutcome | None = None, offer_form: bool = True) -> dict[str, Any]:
    why_not = services.why_not_decide(approval, signed_in(request.user)) if approval.is_open else ""
    return {
        "approval": approval,
        "decisions": approval.decisions.select_related("user"),
        "can_decide": offer_form and approval.is_open and not why_not,
        "why_not": why_not,
        "form": form or DecisionForm(initial={"snapshot_hash": approval.snapshot_hash}),
        "outcome": outcome,
    }


def _facts(approval: ApprovalRequest) -> Facts:
    if not approval.is_open:
        # Closed: re-reading now would report the run's own refund as a change; show what was last checked.
        check = approval.last_check or {}
        return _compare(approval.snapshot, check.get("current"), check.get("problems", []), fresh=False)
    try:
        check = services.revalidate(approval)
    except Unavailable as exc:
        return _compare(approval.snapshot, None, [], fresh=True, unavailable=str(exc))
    return _compare(approval.snapshot, check.current, list(check.problems), fresh=True)


def _compare(snapshot: dict[str, Any], current: dict[str, Any] | None, problems: list[str], *, fresh: bool,
             unavailable: str = "") -> Facts:
    if current is None:
        unavailable = unavailable or "no current values were recorded for this request"
        current = {}
    changed = {d.key for d in differences(snapshot, current)} if not unavailable else set()
    keys = list(snapshot) + [key for key in current if key not in snapshot]
    rows = [FactRow(key, snapshot.get(key), current.get(key), key in changed) for key in keys]
    return Facts(rows, problems, fresh, unavailable)
