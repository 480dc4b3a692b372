"""Every refused decision is in the security log: each refusal of an approval or a resolution (the run's starter,
a role that does not decide, a role that does not resolve) through each channel (the API, the console's form,
its htmx fragment) writes exactly one row of kind `forbidden` naming who, the path and why, and changes nothing.

A decision the service refuses (approvals.services.decide) is written there, whoever called it, so it is in the
log even in a host that has not added RefusalLogMiddleware, and once where it has (docs/security.md).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from approvals import services
from durable.roles import APPROVER, OPERATOR, VIEWER
from tests.conftest import api_token, user_with_roles
from tests.endpoints import (
    World,
    api_target,
    assert_one_refusal_logged,
    build_world,
    console_target,
    logged_in,
    refusals_since,
    security_log_mark,
    written,
)

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Refusal:
    name: str
    does: str  # approve, reject, resolve
    says: str  # what the row's reason says


REFUSALS = [
    Refusal("the-runs-starter", "approve", "you cannot decide its approval"),
    Refusal("the-runs-starter", "reject", "you cannot decide its approval"),
    Refusal("no-approver-role", "approve", "approvals.decide_approvalrequest"),
    Refusal("no-approver-role", "reject", "approvals.decide_approvalrequest"),
    Refusal("no-reconciler-role", "resolve", "durable.resolve_sideeffect"),
]
CHANNELS = ["api", "console", "htmx"]
ROUTES = {("api", "approve"): "api:approval-approve", ("api", "reject"): "api:approval-reject",
          ("api", "resolve"): "api:operation-resolve", ("console", "resolve"): "reconciliation:resolve"}


@pytest.fixture
def world(sandbox, settings) -> World:
    settings.DURABLE_LLM_BASE_URL = ""  # the deterministic planner
    return build_world(sandbox)


def refused_user(refusal: Refusal, world: World):
    if refusal.name == "the-runs-starter":
        world.owner.groups.add(Group.objects.get(name=APPROVER))
        return world.owner
    return user_with_roles(f"as-{refusal.name}", VIEWER, OPERATOR)  # may look and steer, not decide or resolve


def attempt(channel: str, refusal: Refusal, world: World, user, token: str):
    """Post the refused decision through `channel` (the API with `token`); returns the URL and the answer."""
    api = channel == "api"
    route = ROUTES.get(("api" if api else "console", refusal.does), "approvals:decide")
    url, body = api_target(route, world) if api else console_target(route, world, user.username)
    if route == "approvals:decide" and refusal.does == "reject":
        body = {**body, "verdict": "reject", "reason": "duplicate claim"}
    if api:
        client = Client(HTTP_AUTHORIZATION=f"Token {token}")
        return url, client.post(url, json.dumps(body), content_type="application/json")
    headers = {"HTTP_HX_REQUEST": "true"} if channel == "htmx" else {}
    return url, logged_in(user).post(url, body, **headers)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda r: f"{r.name}-{r.does}")
def test_every_refused_decision_writes_one_security_log_row_through_every_channel(world, refusal, channel):
    user = refused_user(refusal, world)
    token = api_token(user)  # made before the marks: only the refused call counts
    before, mark = written(), security_log_mark()
    url, answer = attempt(channel, refusal, world, user, token)
    assert answer.status_code == 403, answer.content[:300]
    assert written() == before
    assert_one_refusal_logged(mark, username=user.username, path=url, says=refusal.says)


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_refused_self_approval_is_logged_without_the_middleware(world, settings, channel):
    settings.MIDDLEWARE = [layer for layer in settings.MIDDLEWARE if not layer.endswith("RefusalLogMiddleware")]
    refusal = REFUSALS[0]
    user = refused_user(refusal, world)
    token = api_token(user)
    mark = security_log_mark()
    url, answer = attempt(channel, refusal, world, user, token)
    assert answer.status_code == 403
    assert_one_refusal_logged(mark, username=user.username, path=url, says=refusal.says)


def test_a_self_approval_refused_to_code_is_logged_with_the_request_it_aimed_at(world):
    world.owner.groups.add(Group.objects.get(name=APPROVER))
    mark = security_log_mark()
    with pytest.raises(services.Forbidden):
        services.decide(request_id=world.approval.id, user=world.owner, verdict="approve",
                        snapshot_hash=world.approval.snapshot_hash, source="script")
    [row] = refusals_since(mark)
    assert (row.kind, row.username, row.source, row.action, row.target) == (
        "forbidden", world.owner.username, "script", "approve", str(world.approval.id))
