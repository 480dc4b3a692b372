"""A workflow's policy for a start whose business key already has an active run: return it (the default),
refuse with a conflict naming it, or start another; enforced by start_run, and race-safe (a partial unique
constraint), so two concurrent starts without an Idempotency-Key never both create."""
from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from durable import OnActiveBusinessKey, Workflow, services
from durable.engine.states import TERMINAL, RunStatus
from durable.errors import Conflict
from durable.models import Checkpoint, Run
from durable.registry import registry
from durable.roles import OPERATOR
from tests.conftest import api_token, user_with_roles
from tests.durable import version_workflows as vw

pytestmark = pytest.mark.django_db

CLAIM = {"order_id": "ORD-1001", "customer_message": "Please refund ORD-1001, it arrived broken."}
ACTIVE = sorted(set(RunStatus) - TERMINAL)


def start_claim(**overrides):
    return services.start_run(**{"workflow": "claims-agent", "input": CLAIM, "business_key": "ORD-1001", **overrides})


@pytest.fixture
def refusing(monkeypatch):
    """The test-versioned workflow's current version, declaring that it refuses a second active run."""
    workflow = vw.build(version=99, on_active_business_key=OnActiveBusinessKey.REFUSE)
    monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    return workflow


def start_refusing(business_key: str = "order-7"):
    return services.start_run(workflow=vw.NAME, input={"order_id": business_key}, business_key=business_key)


def test_the_default_policy_is_to_return_the_existing_run_and_the_demo_declares_it():
    assert Workflow(name="w", version=1, state=vw.In, input=vw.In).on_active_business_key == "return_existing"
    assert registry.current("claims-agent").on_active_business_key is OnActiveBusinessKey.RETURN_EXISTING


@pytest.mark.parametrize("status", ACTIVE)
def test_a_second_start_of_an_active_business_key_returns_the_active_run(status):
    first, created = start_claim()
    Run.objects.filter(id=first.id).update(status=status)
    again, created_again = start_claim(input={**CLAIM, "customer_message": "I asked already"})
    assert (created, created_again, again.id) == (True, False, first.id)
    assert (Run.objects.count(), Checkpoint.objects.count()) == (1, 1)


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_once_the_run_has_ended_the_business_key_starts_a_new_run(status):
    first, _ = start_claim()
    Run.objects.filter(id=first.id).update(status=status)
    again, created = start_claim()
    assert created and again.id != first.id


def test_the_policy_is_per_workflow_and_business_key():
    first, _ = start_claim()
    other_order, created = start_claim(business_key="ORD-1002", input={**CLAIM, "order_id": "ORD-1002"})
    assert created and other_order.id != first.id


def test_a_refusing_workflow_answers_a_conflict_naming_the_active_run(refusing):
    first, _ = start_refusing()
    with pytest.raises(Conflict) as exc:
        start_refusing()
    assert exc.value.current == RunStatus.PENDING and exc.value.extra == {"active_run": str(first.id)}
    assert str(first.id) in str(exc.value) and "on_active_business_key=refuse" in str(exc.value)
    assert Run.objects.count() == 1


def test_a_failed_run_retried_while_another_run_of_its_key_is_active_is_a_conflict(refusing):
    failed, _ = start_refusing()
    Run.objects.filter(id=failed.id).update(status=RunStatus.FAILED)
    active, created = start_refusing()
    assert created
    with pytest.raises(Conflict) as exc:
        services.retry_run(run_id=failed.id, user=None, source="test")
    assert str(active.business_key) in str(exc.value)
    assert Run.objects.get(id=failed.id).status == RunStatus.FAILED


# The API

@pytest.fixture
def api(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user_with_roles('ivy', OPERATOR))}")
    return client


START = {"workflow": "claims-agent", "business_key": "ORD-1001", "input": CLAIM}


def test_the_api_answers_a_second_start_with_the_active_run_and_says_why(api):
    first = api.post("/api/runs/", START, format="json")
    again = api.post("/api/runs/", START, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again["Durable-Existing-Run"] == "active-business-key" and "Durable-Existing-Run" not in first
    retried = api.post("/api/runs/", START, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert retried.status_code == 200 and retried["Durable-Existing-Run"] == "active-business-key"


def test_the_api_answers_a_refused_start_with_a_409_naming_the_active_run(api, refusing):
    body = {"workflow": vw.NAME, "business_key": "order-7", "input": {"order_id": "order-7"}}
    first = api.post("/api/runs/", body, format="json")
    refused = api.post("/api/runs/", body, format="json")
    assert (first.status_code, refused.status_code) == (201, 409)
    assert refused.json()["active_run"] == first.json()["id"]
    assert refused.json()["current_status"] == "PENDING"


def test_the_api_schema_documents_the_policy_the_header_and_the_409():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/runs/"]["post"]
    assert operation["x-on-active-business-key"]["claims-agent"] == "return_existing"
    assert "on_active_business_key" in operation["description"]
    assert sorted(operation["responses"]["200"]["headers"]["Durable-Existing-Run"]["schema"]["enum"]) == [
        "active-business-key", "idempotency-key"]
    conflict = operation["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    assert "active_run" in schema["components"]["schemas"][conflict]["properties"]


# Concurrent starts: real Postgres, one connection per thread.

@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", [OnActiveBusinessKey.RETURN_EXISTING, OnActiveBusinessKey.REFUSE])
def test_concurrent_starts_of_one_business_key_create_one_run(monkeypatch, policy):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need Postgres (SQLite takes one writer at a time)")
    workflow = vw.build(version=99, on_active_business_key=policy)
    monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    starters, barrier = 8, threading.Barrier(8)
    answers: list[object] = []

    def start() -> None:
        barrier.wait()  # every thread past its checks at once: only the constraint can stop the second INSERT
        try:
            answers.append(start_refusing("order-race"))
        except Conflict as exc:
            answers.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=start) for _ in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [run] = Run.objects.filter(business_key="order-race")
    created = [a for a in answers if isinstance(a, tuple) and a[1]]
    assert len(answers) == starters and len(created) == 1 and created[0][0].id == run.id
    others = [a for a in answers if a is not created[0]]
    if policy is OnActiveBusinessKey.RETURN_EXISTING:
        assert all(isinstance(a, tuple) and a[0].id == run.id for a in others)
    else:
        assert all(isinstance(a, Conflict) and a.extra == {"active_run": str(run.id)} for a in others)
