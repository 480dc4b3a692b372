"""Schemathesis against the OpenAPI schema: no operation answers 5xx, and every answer matches the schema.

The schema is the one drf-spectacular serves at /api/schema/, generated in-process; requests go to the
real WSGI application (durable.project.wsgi.application) as a user holding every role permission, with a DRF token.
Each operation gets a bounded, derandomized number of examples, so CI sees the same cases every run.
"""
from __future__ import annotations

import itertools

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from durable.project import wsgi
from durable.roles import ADMIN
from tests.approvals.flow import waiting_claim
from tests.conftest import api_token, user_with_roles
from tests.durable.claims import needs_attention

pytestmark = pytest.mark.django_db

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          unsupported_method]


def application(environ, start_response):
    """The real WSGI app, minus the per-request connection recycling Django's own test client also turns
    off (`kept_connection`, below): the test's transaction must stay open across requests so the seeded rows
    are visible."""
    return wsgi.application(environ, start_response)


@pytest.fixture(autouse=True)
def kept_connection():
    """No connection recycling for the whole test, not only while the app runs: an event stream's response is
    closed (request_finished) after the app returned, once schemathesis has read it (GET /api/runs/{id}/stream/)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = application


@pytest.fixture
def seeded(demo):
    """An admin with a token, a run waiting for approval with its open request, and a run whose
    notification is UNKNOWN: the detail and action endpoints then have real objects to act on."""
    admin = user_with_roles("schemathesis-admin", ADMIN)
    token = api_token(admin)
    run, request = waiting_claim("ORD-1001")
    _, operation = needs_attention(demo, order_id="ORD-1003")
    return {
        "headers": {"Authorization": f"Token {token}"},
        "path": {"id": {"/api/runs/": str(run.id), "/api/approvals/": str(request.id)},
                 "operation_id": {"/api/operations/": operation.operation_id}},
    }


def aim_at_seeded_objects(case, seeded, turn: int) -> None:
    """Every other example acts on a seeded object instead of a generated id (which is almost always a 404),
    so the bodies reach the code behind the lookup."""
    if turn % 2 or not case.path_parameters:
        return
    for name, by_prefix in seeded["path"].items():
        if name in case.path_parameters:
            for prefix, value in by_prefix.items():
                if case.path.startswith(prefix):
                    case.path_parameters[name] = value


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_request_without_a_5xx_and_as_its_schema_says(case, seeded):
    turn = next(_turns)
    aim_at_seeded_objects(case, seeded, turn)
    case.call_and_validate(headers=seeded["headers"], checks=CHECKS)


_turns = itertools.count()


@pytest.mark.parametrize("method, url", [("delete", "/api/runs/"), ("put", "/api/approvals/{approval}/"),
                                         ("patch", "/api/operations/{operation}/")])
def test_a_method_an_endpoint_does_not_route_is_a_405_naming_the_allowed_ones_not_a_403(seeded, client, method, url):
    url = url.format(approval=seeded["path"]["id"]["/api/approvals/"],
                     operation=seeded["path"]["operation_id"]["/api/operations/"])
    response = getattr(client, method)(url, HTTP_AUTHORIZATION=seeded["headers"]["Authorization"])
    assert response.status_code == 405, response.content
    assert "GET" in response["Allow"]


def test_an_api_url_that_matches_no_route_is_a_json_404(seeded, client):
    response = client.get("/api/runs/not-a-uuid/", HTTP_AUTHORIZATION=seeded["headers"]["Authorization"])
    assert (response.status_code, response["Content-Type"], response.json()) == (
        404, "application/json", {"detail": "Not found."})


# Found by reasoning about the Postgres half of bin/test: SQLite stores NUL characters, Postgres refuses them
# (a 500 there). Each place such a string could reach the database answers 400 naming the field, or 404.

def test_a_nul_character_in_a_runs_input_is_a_400_naming_the_field(seeded, client):
    body = {"workflow": "claims-agent", "business_key": "ORD-1002",
            "input": {"order_id": "ORD-1002", "customer_message": "refund\u0000please"}}
    response = client.post("/api/runs/", body, content_type="application/json",
                           HTTP_AUTHORIZATION=seeded["headers"]["Authorization"])
    assert response.status_code == 400 and "input" in response.json(), response.content


def test_a_nul_character_in_a_resolutions_result_is_a_400_naming_the_field(seeded, client):
    operation_id = seeded["path"]["operation_id"]["/api/operations/"]
    body = {"outcome": "succeeded", "reason": "seen in the outbox", "result": {"id\u0000": "x"}}
    response = client.post(f"/api/operations/{operation_id}/resolve/", body, content_type="application/json",
                           HTTP_AUTHORIZATION=seeded["headers"]["Authorization"])
    assert response.status_code == 400 and "result" in response.json(), response.content


def test_an_operation_id_with_a_nul_character_is_a_json_404(seeded, client):
    response = client.get("/api/operations/ab%00cd/", HTTP_AUTHORIZATION=seeded["headers"]["Authorization"])
    assert (response.status_code, response.json()) == (404, {"detail": "Not found."})
