"""Helpers for tests that walk every route: the URLconf's routes, a world of objects to aim them at, what was written.

The route walk is what makes a new form or endpoint impossible to forget: tests compare what it
finds with their own case lists and fail when a route is missing from them.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.resolvers import RoutePattern

from approvals.models import ApprovalDecision, ApprovalRequest
from durable import schedules
from durable.engine.states import RunStatus
from durable.models import (
    ApiToken,
    Checkpoint,
    JournalEntry,
    NotificationPreference,
    PauseSwitch,
    Run,
    RunEvent,
    Schedule,
    SecurityEvent,
    SideEffect,
)
from durable.roles import OPERATOR
from tests.approvals.flow import waiting_claim
from tests.audit import operator_actions
from tests.conftest import api_token, user_with_roles
from tests.durable import version_workflows as vw
from tests.durable.claims import needs_attention
from tests.durable.console.screens import run_in
from tests.durable.cost_workflows import stopped_by_budget

START = {"workflow": "claims-agent", "business_key": "ORD-1002",
         "input": {"order_id": "ORD-1002", "customer_message": "I was charged twice for ORD-1002"}}
SKIPPED_NAMESPACES = ("admin",)  # the Django admin is read-only (tests/durable/test_admin.py)


@dataclass(frozen=True)
class Route:
    name: str  # namespaced, e.g. "api:run-cancel" or "approvals:decide"
    callback: Callable[..., Any]
    kwargs: tuple[str, ...]  # what the URL captures

    @property
    def is_api(self) -> bool:
        """A Django REST framework view (its callback carries the view class as `cls`)."""
        return hasattr(self.callback, "cls")

    @property
    def api_methods(self) -> set[str]:
        """The HTTP methods a DRF route answers: a viewset's routed actions, or an APIView's handlers."""
        actions = getattr(self.callback, "actions", None)
        if actions is not None:
            return set(actions)
        view = self.callback.cls
        return {method for method in view.http_method_names if hasattr(view, method)}


def _captured(pattern: URLPattern | URLResolver) -> tuple[str, ...]:
    if isinstance(pattern.pattern, RoutePattern):
        return tuple(pattern.pattern.converters)
    return tuple(pattern.pattern.regex.groupindex)  # DRF's routers write regular expressions


def _walk(patterns: list[Any], namespace: str, captured: tuple[str, ...]) -> Iterator[Route]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace in SKIPPED_NAMESPACES:
                continue
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, inner, captured + _captured(pattern))
        elif pattern.name:
            yield Route(namespace + pattern.name, pattern.callback, captured + _captured(pattern))


def routes() -> list[Route]:
    """Every named route of the project, the admin's and DRF's `.json` format suffixes left out."""
    return [route for route in _walk(get_resolver().url_patterns, "", ()) if "format" not in route.kwargs]


def api_routes() -> list[Route]:
    return [route for route in routes() if route.is_api]


def page_routes() -> list[Route]:
    """The routes that answer browsers: the console, the login pages, the metrics page."""
    return [route for route in routes() if not route.is_api]


@dataclass
class World:
    """Objects that belong to someone else: `owner` started every run; the users under test act on them by link."""

    owner: User
    waiting: Run  # WAITING_APPROVAL, with its PENDING `approval`
    approval: ApprovalRequest
    attention: Run  # NEEDS_ATTENTION, with its UNKNOWN `operation`
    operation: SideEffect
    failed: Run  # FAILED: may be retried
    blocked: Run  # BLOCKED_VERSION on test-versioned v1 at step b: may be resumed, or migrated to v2
    over_budget: Run  # NEEDS_ATTENTION, stopped by its budget of 300 tokens: its budget may be raised
    token: ApiToken  # the owner's API token: revoked only by them or a holder of durable.manage_apitoken
    switch: PauseSwitch | None = None  # a kill switch that is off, of a workflow no test starts: may be turned on
    schedule: Schedule | None = None  # an operator's schedule, hourly, of test-trivial: may be edited

    def url(self, route_name: str, run: Run | None = None) -> str:
        """The route's URL aimed at this world's objects (at `run` for run routes, else the waiting run)."""
        route = next(r for r in routes() if r.name == route_name)
        run = run or self.waiting
        kind = route_name.split(":")[-1].split("-")[0]
        values = {"run_id": run.id, "request_id": self.approval.id, "operation_id": self.operation.operation_id,
                  "seq": 0, "token_id": self.token.id, "switch_id": self.switch.id if self.switch else 0,
                  "schedule_id": self.schedule.id if self.schedule else None, "pk": {"run": run.id, "approval": self.approval.id,
                                   "operation": self.operation.operation_id,
                                   "pause": self.switch.id if self.switch else 0,
                                   "schedule": self.schedule.id if self.schedule else None}.get(kind)}
        return reverse(route_name, kwargs={name: values[name] for name in route.kwargs})


def build_world(sandbox: Any) -> World:
    """The runs, the approval request and the UNKNOWN operation, made through the services users call."""
    owner = user_with_roles("intake", OPERATOR)
    waiting, approval = waiting_claim("ORD-1001", starter=owner)
    attention, operation = needs_attention(sandbox, order_id="ORD-1003")
    Run.objects.filter(id=attention.id).update(created_by=owner)
    failed = run_in(RunStatus.FAILED, business_key="failed", created_by=owner,
                    error={"kind": "bug", "message": "it broke"})
    blocked = run_in(RunStatus.BLOCKED_VERSION, workflow=vw.NAME, version=1, current_step="b", business_key="blocked",
                     created_by=owner, error={"kind": "version_missing", "message": "no test-versioned v1 here"})
    over_budget = stopped_by_budget(tempfile.mkstemp(prefix="durable-over-budget-")[1], business_key="over-budget")
    Run.objects.filter(id=over_budget.id).update(created_by=owner)
    owner.api_token = api_token(owner, name="intake service")  # the token itself, for tests that call as the owner
    switch = PauseSwitch.objects.create(workflow_name="test-paused-elsewhere", reason="kept off", created_by=owner)
    # An operator's schedule, made by someone other than the runs' owner (whose own actions some tests count).
    schedule = schedules.create(user=user_with_roles("scheduler", OPERATOR), name="hourly", workflow="test-trivial",
                                cron="0 * * * *")
    return World(owner, waiting, approval, attention, operation, failed, blocked, over_budget,
                 ApiToken.objects.get(user=owner), switch, schedule)


def api_target(name: str, world: World) -> tuple[str, dict[str, Any]]:
    """The endpoint's URL on an object it may act on, and a body it would accept."""
    reason = {"reason": "checked with the customer"}
    run, body = {
        "api:run-list": (None, START),
        "api:run-cancel": (world.waiting, reason),
        "api:run-retry": (world.failed, reason),
        "api:run-resume": (world.blocked, reason),
        "api:run-pause": (world.waiting, reason),
        "api:run-fork": (world.failed, {"checkpoint": 0, "state": {}, **reason}),
        "api:pause-switch-list": (None, {"workflow": vw.NAME, "version": 2, **reason}),
        "api:pause-switch-resume": (None, reason),
        "api:run-migrate": (world.blocked, {"to_version": 2, **reason}),
        "api:run-budget": (world.over_budget, {"tokens": 1000, **reason}),
        "api:run-migrate-blocked": (None, {"workflow": vw.NAME, "from_version": 1, "to_version": 2, **reason}),
        "api:run-bulk": (None, {"action": "cancel", "run_ids": [str(world.waiting.id)], **reason}),
        "api:run-events": (world.waiting, {"name": "customer_reply", "payload": {"text": "yes, refund it"}}),
        "api:event-list": (None, {"workflow": world.waiting.workflow_name, "business_key": world.waiting.business_key,
                                  "name": "customer_reply", "payload": {"text": "yes, refund it"}}),
        "api:approval-approve": (None, {"snapshot_hash": world.approval.snapshot_hash}),
        "api:approval-reject": (None, {"snapshot_hash": world.approval.snapshot_hash, "reason": "duplicate claim"}),
        "api:operation-resolve": (None, {"outcome": "succeeded", "external_ref": "ntf-1",
                                         "result": {"notification_id": "ntf-1"}, **reason}),
        "api:schedule-list": (None, {"name": "nightly", "workflow": "test-trivial", "cron": "30 2 * * *",
                                     "time_zone": "Europe/Paris", "input": {"n": 1}}),
        "api:schedule-edit": (None, {"cron": "0 3 * * *", "time_zone": "UTC"}),
        "api:schedule-delete": (None, {"reason": "the report moved"}),
    }[name]
    return world.url(name, run), body


# A schedule as the console's form posts it (durable/console/schedule_forms.py).
SCHEDULE_FORM = {"name": "nightly", "workflow": "test-trivial", "cron": "30 2 * * *", "time_zone": "Europe/Paris",
                 "input": '{"n": 1}', "business_key_template": "nightly:{fire_time:%Y-%m-%d}", "overlap": "skip",
                 "catch_up": "latest", "catch_up_window": "86400"}


def console_target(name: str, world: World, username: str) -> tuple[str, dict[str, str]]:
    """The form's URL on an object it may act on, and what a browser would post (logging in as `username`)."""
    confirmed = {"reason": "checked with the customer", "confirm": "on"}
    run, form = {
        "durable:run-cancel": (world.waiting, confirmed),
        "durable:run-retry": (world.failed, confirmed),
        "durable:run-resume": (world.blocked, confirmed),
        "durable:run-pause": (world.waiting, confirmed),
        "durable:run-fork": (world.failed, {"checkpoint": "0", **confirmed}),
        "durable:paused": (None, {"workflow": vw.NAME, "version": "2", **confirmed}),
        "durable:paused-resume": (None, confirmed),
        "durable:bulk-pause": (None, {"runs": f"{world.waiting.id}:{world.waiting.status}", **confirmed}),
        "durable:bulk-resume": (None, {"runs": f"{world.blocked.id}:{world.blocked.status}", **confirmed}),
        "durable:run-migrate": (world.blocked, {"to_version": "2", **confirmed}),
        "durable:run-budget": (world.over_budget, {"tokens": "1000", **confirmed}),
        "durable:bulk-cancel": (None, {"runs": f"{world.waiting.id}:{world.waiting.status}", **confirmed}),
        "durable:bulk-retry": (None, {"runs": f"{world.failed.id}:{world.failed.status}", **confirmed}),
        "approvals:decide": (None, {"verdict": "approve", "snapshot_hash": world.approval.snapshot_hash}),
        "reconciliation:lookup": (None, {}),
        "reconciliation:resolve": (None, {"outcome": "succeeded", "external_ref": "ntf-1", "reason": "checked",
                                          "result": '{"notification_id": "ntf-1"}'}),
        "durable:tokens": (None, {"name": "nightly export", "days": "30"}),
        "durable:schedule-new": (None, SCHEDULE_FORM),
        "durable:schedule-edit": (None, {**SCHEDULE_FORM, "cron": "0 3 * * *"}),
        "durable:schedule-pause": (None, {}),
        "durable:schedule-resume": (None, {}),  # of an active schedule: a 409, nothing written
        "durable:schedule-delete": (None, confirmed),
        "durable:token-revoke": (None, {"reason": "the service was retired"}),
        "durable:preferences": (None, {"time_zone": "Europe/Paris"}),
        "durable:notifications": (None, {"events": "run_failed"}),
        "durable:login": (None, {"username": username, "password": f"pw-{username}"}),
        "rest_framework:login": (None, {"username": username, "password": f"pw-{username}"}),
        "durable:logout": (None, {}),
        "rest_framework:logout": (None, {}),
    }[name]
    return world.url(name, run), form


def written() -> dict[str, Any]:
    """What the database holds, for a before/after comparison: a refused request changes none of it."""
    return {
        "runs": sorted(Run.objects.values_list("id", "status", "workflow_version", "checkpoint_seq", "budget_tokens",
                                               "budget_cost")),
        "checkpoints": Checkpoint.objects.count(),
        "journal": JournalEntry.objects.count(),
        "side_effects": sorted(SideEffect.objects.values_list("operation_id", "status", "attempts")),
        "approvals": sorted(ApprovalRequest.objects.values_list("id", "status", "approvals_count")),
        "events": sorted(RunEvent.objects.values_list("id", "consumed_at")),
        "decisions": ApprovalDecision.objects.count(),
        "audit": operator_actions().count(),
        "api_tokens": sorted(ApiToken.objects.values_list("id", "revoked_at")),
        "notification_preferences": sorted(NotificationPreference.objects.values_list("user_id", "events", "channels")),
        "schedules": sorted(Schedule.objects.values_list("name", "cron", "time_zone", "paused", "input")),
    }


def logged_in(user: User, **client_options: Any) -> Client:
    client = Client(**client_options)
    client.force_login(user)
    return client


def security_log_mark() -> int:
    """Where the security log is now: refusals_since(mark) returns what was written after it."""
    return SecurityEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0


def refusals_since(mark: int) -> list[SecurityEvent]:
    return list(SecurityEvent.objects.filter(id__gt=mark).order_by("id"))


def assert_one_refusal_logged(mark: int, *, username: str, path: str, action: str = "", says: str = "") -> None:
    """Exactly one row since `mark`, kind forbidden, naming the user, the path, the action (or the endpoint)
    and a reason the refusing code gave (not the middleware's fallback for a refusal that gave none)."""
    rows = refusals_since(mark)
    assert len(rows) == 1, f"{path}: {len(rows)} security-log rows for one 403"
    row = rows[0]
    assert (row.kind, row.username, row.target) == ("forbidden", username, path.split("?")[0][:100]), row
    assert row.action and (not action or row.action == action), row.action
    assert row.reason and "gave no reason" not in row.reason, f"{path}: {row.reason!r}"
    assert says.lower() in row.reason.lower(), row.reason
