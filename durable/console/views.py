"""Console views: the overview, the runs list, a run's history and the actions on it.

A view parses input, calls a selector or a service, renders. With htmx the same view answers
with a fragment (the overview, the rows, a checkpoint's state, the actions panel), also on a
refusal with its 4xx status, which base.html's htmx-config tells htmx to swap.
"""
from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.cache import patch_vary_headers
from django.utils.text import capfirst
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from durable import budgets, tracing
from durable.console import bulk, live, selectors
from durable.console import overview as console_overview
from durable.console import search as finder
from durable.console.actions import ACTIONS, offered_actions
from durable.console.forms import ANY_WAITING, ActionForm, ForkForm, RunsQuery, filter_console_runs, page_marker
from durable.console.live_states import run_state, runs_state
from durable.console.rendering import (
    ActionOutcome,
    fragment_or_page,
    next_page_link,
    page_link,
)
from durable.console.requests import ConsoleRequest
from durable.console.run_graph import run_graph
from durable.console.run_page import run_sections
from durable.console.timeline import run_timeline
from durable.console.waits import run_waits
from durable.engine.states import RunStatus
from durable.engine.waits import WaitKind
from durable.errors import Conflict, InvalidInput
from durable.models import Checkpoint, Run
from durable.permissions import can_see_contents, contents_required, permission_required
from durable.store.checkpoints import fill_states

VIEW = "durable.view_run"
PAGE = 50
ORDER_LABELS = {"newest": "newest first", "cost": "most expensive first", "tokens": "most tokens first"}


def metrics_url() -> str | None:
    """Where the project serves /metrics, if it does: the project mounts that page, not the app."""
    try:
        return reverse("metrics")
    except NoReverseMatch:
        return None


@login_required
@permission_required(VIEW)
@require_safe
def overview(request: ConsoleRequest) -> HttpResponse:
    found = console_overview.overview()
    unchanged = live.not_modified(request, live.stamp(request, repr(found)))
    if unchanged:
        return unchanged
    context = {"overview": found, "metrics_url": metrics_url(), "any_waiting": ANY_WAITING, **found.context()}
    return live.tagged(fragment_or_page(request, "durable/_overview.html", "durable/overview.html", context), request)


@login_required
@permission_required(VIEW)
@require_safe
@live.live(runs_state(PAGE))
def runs(request: ConsoleRequest) -> HttpResponse:
    query = RunsQuery(data={k: v for k, v in request.GET.items() if v})
    # A bad filter shows its error and no runs, rather than every run as if unfiltered.
    if request.GET.get("q"):  # the runs list's old search box: the header's search answers it now
        return _open(request, f"{reverse('durable:search')}?{urlencode({'q': request.GET['q']})}")
    if not query.is_valid():
        return _runs_answer(request, [], query.errors)
    params = query.validated_data
    order = params.get("order") or "newest"
    found = selectors.runs_page(filter_console_runs(Run.objects.all(), params), params.get("after"), PAGE, order)
    return _runs_answer(request, found, {}, order)


def _runs_answer(request: ConsoleRequest, found: list[Run], errors: dict[str, Any],
                 order: str = "newest") -> HttpResponse:
    path = reverse("durable:runs")
    next_page = next_page_link(request, path, found, PAGE, lambda run: page_marker(run, order))
    context = {"runs": found[:PAGE], "errors": errors, "filters": request.GET, "statuses": list(RunStatus),
               "any_waiting": ANY_WAITING, "wait_kinds": [kind.value for kind in WaitKind],
               "orders": ORDER_LABELS,
               "next_page": next_page, "first_page": page_link(request, path, None) if request.GET.get("after") else "",
               "bulk_offered": bulk.offered(request.user), "bulk_query": bulk.filter_query(request)}
    return fragment_or_page(request, "durable/_run_rows.html", "durable/runs.html", context)


@login_required
@permission_required(VIEW)
@require_safe
@live.live(run_state)
def run_detail(request: ConsoleRequest, run_id: UUID) -> HttpResponse:
    return fragment_or_page(request, "durable/_run_live.html", "durable/run_detail.html",
                            _detail_context(request, _run(run_id)))


@contents_required
@permission_required(VIEW)
@require_safe
def checkpoint_state(request: ConsoleRequest, run_id: UUID, seq: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint.objects.select_related("run"), run_id=run_id, seq=seq)
    fill_states([checkpoint])  # a difference's row holds what changed: show the whole state
    return fragment_or_page(request, "durable/_checkpoint_state.html", "durable/checkpoint.html",
                             {"checkpoint": checkpoint})


@login_required
@permission_required(VIEW)
@require_POST
def act(request: ConsoleRequest, run_id: UUID, action: str) -> HttpResponse:
    spec = ACTIONS[action]  # the URLs name only known actions
    if not request.user.has_perm(spec.permission):
        raise PermissionDenied(f"you may not {spec.label.lower()}: that needs the {spec.permission} permission")
    run = _run(run_id)
    form = spec.form(run, request.POST)
    if not form.is_valid():
        return _incomplete(request, run, action, form)
    try:
        run, done = spec.perform(run, request.user, form.cleaned_data)
    except InvalidInput as exc:
        for name, errors in exc.errors.items():
            form.add_error(name if name in form.fields else None, errors)
        return _incomplete(request, run, action, form)
    except Conflict as exc:
        run.refresh_from_db()  # show what the run is now, and only the actions that status allows
        return _answer(request, run, HTTPStatus.CONFLICT, outcome=ActionOutcome("error", f"{capfirst(str(exc))}."))
    if request.htmx:
        return _answer(request, run, HTTPStatus.OK, outcome=ActionOutcome("success", done))
    messages.success(request, done)
    return redirect("durable:run-detail", run.id)


def _incomplete(request: ConsoleRequest, run: Run, action: str, form: ActionForm) -> HttpResponse:
    """A 400 with the form and its errors, opened, so the operator corrects it and confirms again."""
    first = next(str(error) for errors in form.errors.values() for error in errors)
    return _answer(request, run, HTTPStatus.BAD_REQUEST, forms={action: form},
                   outcome=ActionOutcome("error", f"Nothing was done: {first}"))


def _answer(request: ConsoleRequest, run: Run, status: HTTPStatus, **panel: Any) -> HttpResponse:
    """The run's live region for htmx (its new state, the outcome, the actions left), else the whole page."""
    live.stamp(request, run_state(request, run.id))  # the region shows this state: its next poll answers 304
    template = "durable/_run_live.html" if request.htmx else "durable/run_detail.html"
    return live.tagged(render(request, template, _detail_context(request, run, **panel), status=status), request)


def _run(run_id: UUID) -> Run:
    return get_object_or_404(Run, id=run_id)


def _detail_context(request: ConsoleRequest, run: Run, **panel: Any) -> dict[str, Any]:
    # The timeline and the ledger are the run's contents: without the rule, the page shows status and metadata.
    contents = can_see_contents(request.user)
    return {
        "contents": contents,
        "timeline": run_timeline(run) if contents else [],
        "side_effects": run.side_effects.all() if contents else [],
        "visit_spending": budgets.by_visit(run) if contents else [],  # what each step visit's model calls used
        "delegated": budgets.with_children(run),  # with what the child runs it started used
        "graph": run_graph(run),  # drawn from the topology the run is pinned to, with its visits
        "sections": run_sections(run),  # what the apps add (durable/console/run_page.py): approvals' requests
        "trace_url": tracing.trace_url(run),  # DURABLE_TRACE_URL with the run's trace id, when both are there
        **run_waits(run, contents),  # what it waits for, its mailbox, its parent and children
        **_panel(request, run, **panel),
    }


def _panel(request: ConsoleRequest, run: Run, *, forms: dict[str, ActionForm] | None = None,
           outcome: ActionOutcome | None = None) -> dict[str, Any]:
    forms = forms or {}
    offered = [(action, forms.get(action.name) or action.form(run)) for action in offered_actions(run, request.user)]
    return {"run": run, "offered": offered, "outcome": outcome,
            **_fork_form(request, run)}


def _fork_form(request: ConsoleRequest, run: Run) -> dict[str, Any]:
    """The "Fork from here" form each checkpoint of the timeline shows, for who may fork (no ids: it repeats)."""
    fork = ACTIONS["fork"]
    if not request.user.has_perm(fork.permission):
        return {"fork": None}
    return {"fork": fork, "fork_form": ForkForm(auto_id=False)}


@login_required
@permission_required(VIEW)
@require_safe
def search(request: ConsoleRequest) -> HttpResponse:
    """The header's search box: one hit opens its page; several are listed, a page of runs at a time."""
    context: dict[str, Any] = {"q": request.GET.get("q", "")}
    if "q" not in request.GET:  # the page itself: what can be searched
        return render(request, "durable/search.html", context)
    query = finder.SearchQuery(data={k: v for k, v in request.GET.items() if k in ("q", "after")})
    if not query.is_valid():
        return render(request, "durable/search.html", {**context, "errors": query.errors},
                      status=HTTPStatus.BAD_REQUEST)
    params = query.validated_data
    found = finder.search(params["q"], request.user, after=params.get("after"), size=PAGE)
    if found.single is not None and "after" not in params:
        return _open(request, found.single.url)
    path = reverse("durable:search")
    runs = [hit.run for hit in found.runs]
    context.update(found=found, first_page=page_link(request, path, None) if "after" in params else "",
                   next_page=page_link(request, path, page_marker(runs[-1])) if found.more else "")
    return render(request, "durable/search.html", context)


def _open(request: ConsoleRequest, url: str) -> HttpResponse:
    """Go to `url`: a redirect, or for htmx the client-side one it follows as a whole page."""
    response = HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    patch_vary_headers(response, ("HX-Request",))
    return response
