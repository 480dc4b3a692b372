"""Object-level permissions: a valid link to someone else's run, approval request or operation, with a
complete and valid body, does nothing for a user whose roles do not grant that action, through the API or
the console; the same link and body work for a user whose role does. The run's starter cannot decide its
approval through any link, nor even invalidate it.

tests/test_roles_matrix.py checks each role against each endpoint with empty bodies; this file checks that a
refusal comes before anything is written, when the request would otherwise succeed.
"""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from approvals.models import ApprovalRequest
from durable.roles import APPROVER, OPERATOR, RECONCILER, ROLES
from tests.audit import operator_actions
from tests.conftest import api_token, user_with_roles
from tests.endpoints import (
    World,
    api_target,
    assert_one_refusal_logged,
    build_world,
    console_target,
    logged_in,
    security_log_mark,
    written,
)

pytestmark = pytest.mark.django_db

STEER, DECIDE, RESOLVE = "durable.{}_run", "approvals.decide_approvalrequest", "durable.resolve_sideeffect"

# (route, what the request does, the permission it needs)
CASES = [
    *((f"api:run-{action}", action, STEER.format(action)) for action in ("cancel", "retry", "resume", "migrate")),
    ("api:approval-approve", "approve", DECIDE),
    ("api:approval-reject", "reject", DECIDE),
    ("api:operation-resolve", "resolve", RESOLVE),
    ("api:run-bulk", "cancel", STEER.format("cancel")),
    *((f"durable:run-{action}", action, STEER.format(action)) for action in ("cancel", "retry", "resume", "migrate")),
    *((f"durable:bulk-{action}", action, STEER.format(action)) for action in ("cancel", "retry")),
    ("approvals:decide", "approve", DECIDE),
    ("approvals:decide", "reject", DECIDE),
    ("reconciliation:resolve", "resolve", RESOLVE),
    ("reconciliation:lookup", "ask the downstream", RESOLVE),
]


@pytest.fixture
def world(sandbox, settings) -> World:
    # The deterministic planner, with the usual HTTP timeout rather than demo's 0.3 s, which a
    # busy CI machine can outlast before the runs this world needs have reached their states.
    settings.DURABLE_LLM_BASE_URL = ""
    return build_world(sandbox)


def target(route: str, does: str, world: World) -> tuple[str, dict]:
    if route.startswith("api:"):
        return api_target(route, world)
    url, form = console_target(route, world, "")
    if does == "reject":
        form = {**form, "verdict": "reject", "reason": "duplicate claim"}
    return url, form


def with_token(user):
    """The user, with an API token made now: before the test notes what is written, so only the call counts."""
    user.api_token = api_token(user)
    return user


def post(user, route: str, url: str, body: dict):
    if route.startswith("api:"):
        client = Client(HTTP_AUTHORIZATION=f"Token {user.api_token}")
        return client.post(url, json.dumps(body), content_type="application/json")
    return logged_in(user).post(url, body)


def answered(route: str) -> int:
    """The status a granted request gets: the API's 200; a console form redirects to the page it acted on,
    except the pages that show their result in place (a bulk action's report, the downstream's answer)."""
    shown_in_place = route.startswith("durable:bulk-") or route == "reconciliation:lookup"
    return 200 if route.startswith("api:") or shown_in_place else 302


def users_without(permission: str) -> list:
    """Each role that lacks `permission` on its own, and one user holding all of them together."""
    lacking = [role for role, permissions in ROLES.items() if permission not in permissions]
    users = [user_with_roles(f"as-{role}", role) for role in lacking] + [user_with_roles("as-all-the-rest", *lacking)]
    return [with_token(user) for user in users]


def granting_role(permission: str) -> str:
    return next(role for role in (OPERATOR, APPROVER, RECONCILER) if permission in ROLES[role])


@pytest.mark.parametrize("route,does,permission", CASES, ids=[f"{r}-{d}" for r, d, _ in CASES])
def test_without_the_role_a_link_to_someone_elses_object_is_refused_and_changes_nothing(world, route, does,
                                                                                        permission):
    url, body = target(route, does, world)
    users = users_without(permission)
    before, wrong = written(), []
    for user in users:
        status = post(user, route, url, body).status_code
        if status != 403:
            wrong.append(f"{user.username}: {status}")
    assert wrong == [], f"{does} through {url}"
    assert written() == before
    # The same link and body work for someone whose role grants it: the refusal was the role's.
    allowed = with_token(user_with_roles("allowed", granting_role(permission)))
    assert post(allowed, route, url, body).status_code == answered(route)
    assert written() != before, f"{does} through {url} wrote nothing for a user whose role grants it"


STARTER_CHANNELS = [("api:approval-reject", "reject"), ("approvals:decide", "approve"), ("approvals:decide", "reject")]


@pytest.mark.parametrize("route,verdict", STARTER_CHANNELS, ids=[f"{r}-{v}" for r, v in STARTER_CHANNELS])
def test_the_runs_starter_cannot_decide_its_approval_even_holding_the_approver_role(world, route, verdict):
    """The API's approve and the console's htmx approve are covered in tests/approvals; these are the others."""
    world.owner.groups.add(Group.objects.get(name=APPROVER))
    url, body = target(route, verdict, world)
    before, mark = written(), security_log_mark()
    response = post(world.owner, route, url, body)
    assert response.status_code == 403 and b"you cannot decide its approval" in response.content.lower()
    assert written() == before
    assert_one_refusal_logged(mark, username=world.owner.username, path=url, says="you cannot decide its approval")


@pytest.mark.parametrize("route", ["api:approval-approve", "approvals:decide"])
def test_the_runs_starter_cannot_invalidate_its_approval_by_trying_to_approve_on_moved_facts(world, demo, route):
    """Separation of duties comes before the facts are re-read: the starter's attempt writes nothing at all,
    where an approver's attempt on the same moved facts invalidates the request (and is audited as theirs)."""
    world.owner.groups.add(Group.objects.get(name=APPROVER))
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})
    url, body = target(route, "approve", world)
    before = written()
    assert post(world.owner, route, url, body).status_code == 403
    assert written() == before and not operator_actions().filter(actor=world.owner).exists()
    assert post(with_token(user_with_roles("approver", APPROVER)), route, url, body).status_code == 409
    assert ApprovalRequest.objects.get(id=world.approval.id).status == "INVALIDATED"
