"""Every role against every console screen and API endpoint: allowed exactly where its permissions say.

A role is allowed an endpoint when it holds every permission the endpoint needs; then the
answer is anything but 403 (bodies here are often incomplete, so 400 is an allowed answer).
Otherwise the answer is 403. Anonymous callers go to the login page, or get the API's 401 asking for a token.
"""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import resolve

from approvals.models import ApprovalRequest
from durable import schedules
from durable.models import ApiToken, Run, Schedule, SideEffect
from durable.permissions import CONTENTS_PERMISSIONS as CONTENTS
from durable.roles import ROLES
from tests.approvals.flow import waiting_claim
from tests.conftest import api_token, make_user, user_with_roles
from tests.endpoints import assert_one_refusal_logged, refusals_since, routes, security_log_mark

pytestmark = pytest.mark.django_db

VIEW_RUN, VIEW_OP, VIEW_APPROVAL, VIEW_AUDIT = ("durable.view_run", "durable.view_sideeffect",
                                                "approvals.view_approvalrequest", "durable.view_operatoraction")
DECIDE, RESOLVE = "approvals.decide_approvalrequest", "durable.resolve_sideeffect"
MANAGE_TOKENS = "durable.manage_apitoken"
SEND_EVENT = "durable.send_event"
VIEW_SCHEDULE, MANAGE_SCHEDULE = "durable.view_schedule", "durable.manage_schedule"


def endpoints(run: Run, approval: ApprovalRequest, op: SideEffect, token: ApiToken, schedule: Schedule,
              ) -> list[tuple[str, str, tuple[str, ...]]]:
    """(method, path, the permissions it needs). CONTENTS is the contents rule (durable/permissions.py)."""
    r, a, o, t, s = run.id, approval.id, op.operation_id, token.id, schedule.id
    return [
        # Console
        ("GET", "/", (VIEW_RUN,)),
        ("GET", "/runs/", (VIEW_RUN,)),
        ("GET", "/search/?q=ORD-1001", (VIEW_RUN,)),
        ("GET", f"/runs/{r}/", (VIEW_RUN,)),
        ("GET", f"/runs/{r}/checkpoints/0/", (VIEW_RUN, *CONTENTS)),
        ("POST", f"/runs/{r}/cancel/", ("durable.cancel_run",)),
        ("POST", f"/runs/{r}/retry/", ("durable.retry_run",)),
        ("POST", f"/runs/{r}/resume/", ("durable.resume_run",)),
        ("POST", f"/runs/{r}/migrate/", ("durable.migrate_run",)),
        ("POST", f"/runs/{r}/budget/", ("durable.raise_budget",)),
        ("POST", f"/runs/{r}/pause/", ("durable.pause_run",)),
        ("POST", f"/runs/{r}/fork/", ("durable.fork_run",)),
        *((method, f"/runs/bulk/{action}/", (VIEW_RUN, f"durable.{action}_run"))
          for action in ("cancel", "retry", "pause", "resume") for method in ("GET", "POST")),
        ("GET", "/approvals/", (VIEW_APPROVAL,)),
        ("GET", f"/approvals/{a}/", (VIEW_APPROVAL,)),
        ("POST", f"/approvals/{a}/decide/", (DECIDE,)),
        ("GET", "/reconciliation/", CONTENTS),
        ("GET", f"/reconciliation/{o}/", CONTENTS),
        ("POST", f"/reconciliation/{o}/lookup/", (*CONTENTS, RESOLVE)),
        ("POST", f"/reconciliation/{o}/resolve/", (*CONTENTS, RESOLVE)),
        ("GET", "/audit/", (VIEW_AUDIT,)),
        ("GET", "/audit/export.csv", (VIEW_AUDIT,)),
        ("GET", "/tokens/", ()),  # every user manages their own tokens
        ("POST", "/tokens/", ()),
        ("POST", f"/tokens/{t}/revoke/", (MANAGE_TOKENS,)),  # someone else's token
        ("GET", "/limits/", (VIEW_RUN,)),
        ("GET", "/paused/", (VIEW_RUN,)),
        ("POST", "/paused/", (VIEW_RUN, "durable.pause_run")),
        ("POST", "/paused/999999/resume/", ("durable.pause_run",)),
        ("GET", "/schedules/", (VIEW_SCHEDULE,)),
        ("GET", "/schedules/new/", (MANAGE_SCHEDULE,)),
        ("POST", "/schedules/new/", (MANAGE_SCHEDULE,)),
        ("GET", f"/schedules/{s}/", (VIEW_SCHEDULE,)),
        ("GET", f"/schedules/{s}/edit/", (MANAGE_SCHEDULE,)),
        ("POST", f"/schedules/{s}/edit/", (MANAGE_SCHEDULE,)),
        ("POST", f"/schedules/{s}/pause/", (MANAGE_SCHEDULE,)),
        ("POST", f"/schedules/{s}/resume/", (MANAGE_SCHEDULE,)),
        ("POST", f"/schedules/{s}/delete/", (MANAGE_SCHEDULE,)),  # an empty form: a 400, the schedule stays
        ("GET", "/preferences/", ()),  # every user sets their own time zone
        ("POST", "/preferences/", ()),
        ("GET", "/notifications/", (VIEW_RUN,)),  # one's own preferences: any console role
        ("POST", "/notifications/", (VIEW_RUN,)),
        # API
        ("GET", "/api/runs/", (VIEW_RUN,)),
        ("POST", "/api/runs/", ("durable.start_run",)),
        ("GET", f"/api/runs/{r}/", (VIEW_RUN,)),
        ("POST", f"/api/runs/{r}/cancel/", ("durable.cancel_run",)),
        ("POST", f"/api/runs/{r}/retry/", ("durable.retry_run",)),
        ("POST", f"/api/runs/{r}/resume/", ("durable.resume_run",)),
        ("POST", f"/api/runs/{r}/migrate/", ("durable.migrate_run",)),
        ("POST", f"/api/runs/{r}/budget/", ("durable.raise_budget",)),
        ("POST", f"/api/runs/{r}/pause/", ("durable.pause_run",)),
        ("POST", f"/api/runs/{r}/fork/", ("durable.fork_run",)),
        ("GET", "/api/pause-switches/", (VIEW_RUN,)),
        ("POST", "/api/pause-switches/", ("durable.pause_run",)),
        ("GET", "/api/pause-switches/999999/", (VIEW_RUN,)),
        ("POST", "/api/pause-switches/999999/resume/", ("durable.pause_run",)),
        ("POST", "/api/runs/migrate-blocked/", ("durable.migrate_run",)),
        ("POST", "/api/runs/bulk/", (VIEW_RUN,)),  # then the permission of the action named (test_bulk_api.py)
        ("GET", f"/api/runs/{r}/events/", (VIEW_RUN,)),  # payloads only under the contents rule (test_events.py)
        ("POST", f"/api/runs/{r}/events/", (SEND_EVENT,)),
        ("GET", f"/api/runs/{r}/stream/", (VIEW_RUN,)),  # chunks' data only under the contents rule (test_stream.py)
        ("POST", "/api/events/", (SEND_EVENT,)),
        ("GET", "/api/operations/", (VIEW_OP, *CONTENTS)),
        ("GET", f"/api/operations/{o}/", (VIEW_OP, *CONTENTS)),
        ("POST", f"/api/operations/{o}/resolve/", (RESOLVE, *CONTENTS)),
        ("GET", "/api/approvals/", (VIEW_APPROVAL,)),
        ("GET", f"/api/approvals/{a}/", (VIEW_APPROVAL,)),
        ("GET", f"/api/approvals/{a}/revalidation/", (VIEW_APPROVAL,)),
        ("POST", f"/api/approvals/{a}/approve/", (DECIDE,)),
        ("POST", f"/api/approvals/{a}/reject/", (DECIDE,)),
        ("GET", "/api/schedules/", (VIEW_SCHEDULE,)),
        ("POST", "/api/schedules/", (MANAGE_SCHEDULE,)),
        ("GET", f"/api/schedules/{s}/", (VIEW_SCHEDULE,)),
        ("POST", f"/api/schedules/{s}/edit/", (MANAGE_SCHEDULE,)),
        ("POST", f"/api/schedules/{s}/delete/", (MANAGE_SCHEDULE,)),  # last: the schedule is gone after it
    ]


@pytest.fixture
def objects(demo):
    run, approval = waiting_claim()
    op = SideEffect.objects.create(operation_id="f" * 32, run=run, step="payment", action_name="refund",
                                   downstream="payments", business_key="ORD-1001", request_hash="0" * 64,
                                   status="UNKNOWN")
    api_token(make_user("a-service"))
    schedule = schedules.create(user=None, name="matrix", workflow="test-trivial", cron="0 2 * * *")
    return run, approval, op, ApiToken.objects.get(), schedule


def call(client: Client, method: str, path: str):
    if method == "GET":
        return client.get(path)
    if method == "DELETE":
        return client.delete(path, {}, content_type="application/json")
    if path.startswith("/api/"):
        return client.post(path, {}, content_type="application/json")
    return client.post(path, {})  # a form post, as the console sends


def read_as_sender(method: str, path: str, held: set[str]) -> bool:
    """A run and its mailbox, asked for by a role that may send events but not view runs (the webhook): it reads
    only runs it sent an event to, so any other is 404, as a run that does not exist (durable/api/permissions.py)."""
    parts = path.split("/")  # "", "api", "runs", id, "" or "events", ...
    return (method == "GET" and parts[1:3] == ["api", "runs"] and len(parts) >= 5 and parts[4] in ("", "events")
            and VIEW_RUN not in held and SEND_EVENT in held)


def lists_as_sender(method: str, path: str, held: set[str]) -> bool:
    """The runs list, asked for by such a role: its own runs only (none here: 200, an empty page)."""
    return method == "GET" and path == "/api/runs/" and VIEW_RUN not in held and SEND_EVENT in held


@pytest.mark.parametrize("role", list(ROLES))
def test_each_role_reaches_exactly_the_endpoints_its_permissions_allow(objects, role):
    client = Client()
    client.force_login(user_with_roles(f"as-{role}", role))
    held = set(ROLES[role])
    wrong = []
    for method, path, needs in endpoints(*objects):
        status = call(client, method, path).status_code
        if read_as_sender(method, path, held):
            if status != 404:
                wrong.append(f"{method} {path}: {status}, expected 404 (a run it sent no event to)")
            continue
        if lists_as_sender(method, path, held):
            if status != 200:
                wrong.append(f"{method} {path}: {status}, expected 200 (its own runs, none)")
            continue
        allowed = set(needs) <= held
        if allowed == (status == 403):
            wrong.append(f"{method} {path}: {status}, expected {'allowed' if allowed else '403'}")
    assert wrong == []


def test_anonymous_callers_go_to_login_or_are_refused_by_the_api(objects):
    client = Client()
    wrong = []
    for method, path, _ in endpoints(*objects):
        response = call(client, method, path)
        if path.startswith("/api/"):
            ok = (response.status_code, response.get("WWW-Authenticate")) == (401, "Token")
        else:
            ok = response.status_code == 302 and response["Location"].startswith("/accounts/login/")
        if not ok:
            wrong.append(f"{method} {path}: {response.status_code}")
    assert wrong == []


def test_a_user_with_no_role_is_refused_everywhere_but_their_own_tokens(objects):
    client = Client()
    client.force_login(user_with_roles("nobody"))
    refused = [call(client, method, path).status_code for method, path, needs in endpoints(*objects) if needs]
    assert set(refused) == {403}


@pytest.mark.parametrize("role", [*ROLES, None, "anonymous"], ids=[*ROLES, "no-role", "anonymous"])
def test_every_403_writes_one_security_log_row_naming_who_what_and_why(objects, role):
    """Walks every endpoint and form above as each role, with no role, and anonymously: each 403 wrote exactly
    one row (user, action or endpoint, path, a reason the refusing code gave); no other answer wrote one."""
    client, username = Client(), ""
    if role != "anonymous":
        user = user_with_roles(f"as-{role}", *([role] if role else []))
        client.force_login(user)
        username = user.username
    refused = 0
    for method, path, _ in endpoints(*objects):
        mark = security_log_mark()
        if call(client, method, path).status_code == 403:
            assert_one_refusal_logged(mark, username=username, path=path)
            refused += 1
        else:
            assert not [row for row in refusals_since(mark) if row.kind == "forbidden"], f"{method} {path}"
    assert refused > 0 or role in ("admin", "anonymous")  # anonymous: the login page, or the API's 401


# Routes that refuse no logged-in user (the login pages, the API's index and schema), and /metrics, whose
# refusals (a wrong token, a missing permission) tests/durable/test_refusal_log.py checks.
NEVER_REFUSE = {"durable:login", "durable:logout", "rest_framework:login", "rest_framework:logout", "api:api-root",
                "schema", "metrics"}


def test_the_walk_reaches_every_route_that_can_refuse(objects):
    """A new screen or endpoint that is not in endpoints() above fails here, so its 403s are checked too."""
    walked = {resolve(path.split("?")[0]).view_name for _, path, _ in endpoints(*objects)}
    assert {route.name for route in routes()} - walked - NEVER_REFUSE == set()
