"""Reconciliation console: operations waiting for reconciliation, one operation's evidence, and its resolution.

A view parses input, calls a selector or a service, renders. With htmx the lookup and the resolution
answer with their panel alone, also on a refusal with its 4xx/503 status (base.html's htmx-config
swaps those); without htmx a resolution redirects back to the operation with a message.
"""
from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from durable.conf import durable_settings
from durable.console import live
from durable.console.paging import page_marker
from durable.console.rendering import ActionOutcome, fragment_or_page, next_page_link
from durable.console.requests import ConsoleRequest
from durable.downstream import get_downstream
from durable.engine.ledger import OperationStatus as Op
from durable.engine.ledger import Reconciliation as Decision
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput, Unavailable
from durable.models import Run, SideEffect
from durable.permissions import contents_required, permission_required
from durable.runtime.reconciler import Finding
from reconciliation.forms import QueuePage, ResolveForm
from reconciliation.selectors import (
    awaiting_reconciliation,
    operation_actions,
    operation_journal,
    operation_state,
    queue_state,
)
from reconciliation.services import (
    DID_NOT_HAPPEN,
    SUCCEEDED,
    ask_downstream,
    resolve_operation,
    why_no_lookup,
)

# Every screen here shows ledger rows and journal entries: the contents rule (durable/permissions.py) guards each.
RESOLVE = "durable.resolve_sideeffect"
PAGE = 50
SETTLED = {
    Op.SUCCEEDED: "Recorded as SUCCEEDED with reference {ref}.",
    Op.FAILED_RETRYABLE: "Recorded as not happened: the step sends it again with the same key.",
    Op.FAILED_FINAL: "Recorded as not happened: the step fails without sending it.",
}


@contents_required
@require_safe
@live.live(lambda request: queue_state(PAGE, _page_after(request)))
def operations(request: ConsoleRequest) -> HttpResponse:
    page = QueuePage(request.GET)
    # A bad marker shows its error and no operations, rather than the first page as if it were the asked one.
    found = awaiting_reconciliation(PAGE, page.cleaned_data["after"]) if page.is_valid() else []
    next_page = next_page_link(request, reverse("reconciliation:operations"), found, PAGE,
                               lambda last: page_marker(last.updated_at, last.operation_id))
    context = {"operations": found[:PAGE], "next_page": next_page, "errors": page.errors,
               "first_page": reverse("reconciliation:operations") if page.data.get("after") else "",
               "started_after": durable_settings.DURABLE_RECONCILE_AFTER_SECONDS}
    return fragment_or_page(request, "reconciliation/_queue.html", "reconciliation/operations.html", context)


@contents_required
@require_safe
@live.live(lambda request, operation_id: operation_state(operation_id))
def operation(request: ConsoleRequest, operation_id: str) -> HttpResponse:
    return fragment_or_page(request, "reconciliation/_operation_live.html", "reconciliation/operation.html",
                            _page(request, _operation(operation_id)))


# Asking and resolving show the operation too, so they need the contents rule and the permission to resolve.
@contents_required
@permission_required(RESOLVE)
@require_POST
def lookup(request: ConsoleRequest, operation_id: str) -> HttpResponse:
    row = _operation(operation_id)
    try:
        finding = ask_downstream(operation=row)
    except Unavailable as exc:
        return _answer(request, row, HTTPStatus.SERVICE_UNAVAILABLE, "reconciliation/_lookup.html",
                       lookup=_lookup_panel(row, error=str(exc)))
    suggested = _suggested(row, finding)
    return _answer(request, row, HTTPStatus.OK, "reconciliation/_lookup.html",
                   lookup=_lookup_panel(row, finding=finding, suggested=suggested is not None),
                   resolution=_resolution_panel(request, row, form=suggested))


@contents_required
@permission_required(RESOLVE)
@require_POST
def resolve(request: ConsoleRequest, operation_id: str) -> HttpResponse:
    row = _operation(operation_id)
    form = ResolveForm(request.POST)
    if not form.is_valid():
        return _refused(request, row, form)
    try:
        resolved = resolve_operation(operation_id=row.operation_id, user=request.user, source="console",
                                     **form.cleaned_data)
    except InvalidInput as exc:
        for name, errors in exc.errors.items():
            form.add_error(name if name in form.fields else None, errors)
        return _refused(request, row, form)
    except Conflict as exc:
        row.refresh_from_db()  # show what it is now; no form, since it needs no resolution any more
        return _resolution_answer(request, row, HTTPStatus.CONFLICT, outcome=ActionOutcome("error", str(exc)))
    outcome = ActionOutcome("success", _what_now(resolved))
    if request.htmx:
        return _resolution_answer(request, resolved, HTTPStatus.OK, outcome=outcome)
    messages.success(request, outcome.message)
    return redirect("reconciliation:operation", resolved.operation_id)


def _page_after(request: ConsoleRequest) -> tuple[Any, str] | None:
    page = QueuePage(request.GET)
    return page.cleaned_data["after"] if page.is_valid() else None


def _refused(request: ConsoleRequest, row: SideEffect, form: ResolveForm) -> HttpResponse:
    outcome = ActionOutcome("error", "Nothing was resolved: correct the form and resolve again.")
    return _resolution_answer(request, row, HTTPStatus.BAD_REQUEST, form=form, outcome=outcome)


def _what_now(row: SideEffect) -> str:
    settled = SETTLED[Op(row.status)].format(ref=row.external_ref)
    run_status = Run.objects.values_list("status", flat=True).get(id=row.run_id)
    if run_status == RunStatus.PENDING:
        return f"{settled} The run is PENDING again: a worker continues it from its last checkpoint."
    if run_status == RunStatus.NEEDS_ATTENTION:
        return f"{settled} The run still waits: another of its operations is UNKNOWN."
    return f"{settled} The run is {run_status}."


def _suggested(row: SideEffect, finding: Finding) -> ResolveForm | None:
    """A lookup's answer fills in the resolution form; the operator still checks it and decides."""
    if row.status != Op.UNKNOWN or (finding.found is None and finding.decision is not Decision.NOT_FOUND):
        return None
    reason = f"asked {row.downstream} on {timezone.now():%Y-%m-%d %H:%M:%S %Z}: {finding.evidence}"
    if finding.found is None:
        return ResolveForm(initial={"outcome": DID_NOT_HAPPEN, "reason": reason})
    return ResolveForm(initial={"outcome": SUCCEEDED, "external_ref": finding.found.external_ref, "reason": reason,
                                "result": json.dumps(finding.found.result, indent=2, sort_keys=True)})


def _answer(request: ConsoleRequest, row: SideEffect, status: HTTPStatus, panel_template: str,
            **panels: dict[str, Any]) -> HttpResponse:
    """One panel for htmx, else the whole page around it, with the answer's status."""
    context = _page(request, row, **panels)
    return render(request, panel_template if request.htmx else "reconciliation/operation.html", context, status=status)


def _resolution_answer(request: ConsoleRequest, row: SideEffect, status: HTTPStatus, **panel: Any) -> HttpResponse:
    """The operation's live region (its state now, the outcome, the resolution panel) for htmx, else the page."""
    live.stamp(request, operation_state(row.operation_id))  # the region shows this state: its next poll is a 304
    response = _answer(request, row, status, "reconciliation/_operation_live.html",
                       resolution=_resolution_panel(request, row, **panel))
    return live.tagged(response, request)


def _operation(operation_id: str) -> SideEffect:
    return get_object_or_404(SideEffect.objects.select_related("run", "resolved_by"), operation_id=operation_id)


def _page(request: ConsoleRequest, row: SideEffect, *, lookup: dict[str, Any] | None = None,
          resolution: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "operation": row,
        "run": row.run,
        "journal": operation_journal(row),
        **(lookup or _lookup_panel(row)),
        **(resolution or _resolution_panel(request, row)),
    }


def _lookup_panel(row: SideEffect, *, finding: Finding | None = None, error: str = "",
                  suggested: bool = False) -> dict[str, Any]:
    downstream = get_downstream(row.downstream)
    return {"downstream": downstream, "why_no_lookup": why_no_lookup(row, downstream), "finding": finding,
            "lookup_error": error, "suggested": suggested, "asked_at": timezone.now()}


def _resolution_panel(request: ConsoleRequest, row: SideEffect, *, form: ResolveForm | None = None,
                      outcome: ActionOutcome | None = None) -> dict[str, Any]:
    return {
        "actions": operation_actions(row),
        "can_resolve": row.status == Op.UNKNOWN and request.user.has_perm(RESOLVE),
        "form": form or ResolveForm(),
        "outcome": outcome,
    }
