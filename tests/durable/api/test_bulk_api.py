"""POST /api/runs/bulk/: cancel or retry many runs with one reason, by id or by GET /api/runs/'s filters.

Bad input is a 400 naming the field; the single-run action's permission is needed (403); a dry run answers
what would happen and writes nothing; the answer lists each run's outcome.
"""
from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from durable.engine.states import RunStatus
from durable.models import Run
from tests.audit import operator_actions
from tests.conftest import assert_unauthenticated, make_user
from tests.durable.console.screens import run_in
from tests.endpoints import written

pytestmark = pytest.mark.django_db

BULK = "/api/runs/bulk/"


def client_of(*perms: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(make_user(f"user-{uuid.uuid4().hex[:6]}", "durable.view_run", *perms))
    return client


@pytest.fixture
def operator() -> APIClient:
    return client_of("durable.cancel_run", "durable.retry_run")


@pytest.fixture
def runs() -> dict[str, Run]:
    return {"failed": run_in(RunStatus.FAILED, business_key="ORD-1"),
            "pending": run_in(RunStatus.PENDING, business_key="ORD-2"),
            "done": run_in(RunStatus.SUCCEEDED, business_key="ORD-3")}


def test_a_bulk_cancel_by_ids_answers_each_runs_outcome(operator, runs):
    body = {"action": "cancel", "reason": "order withdrawn", "run_ids": [str(r.id) for r in runs.values()]}
    answer = operator.post(BULK, body, format="json")
    assert answer.status_code == 200, answer.data
    data = answer.json()
    assert data["dry_run"] is False and data["bulk_id"]
    assert data["counts"] == {"cancelled": 1, "not_applicable": 2, "skipped": 0, "not_found": 0}
    assert data["run_ids"]["cancelled"] == [str(runs["pending"].id)]
    outcomes = {item["run_id"]: (item["outcome"], item["status"]) for item in data["runs"]}
    assert outcomes == {str(runs["pending"].id): ("cancelled", "CANCELLED"),
                        str(runs["failed"].id): ("not_applicable", "FAILED"),
                        str(runs["done"].id): ("not_applicable", "SUCCEEDED")}
    assert {a.detail["bulk_id"] for a in operator_actions()} == {data["bulk_id"]}


def test_a_bulk_retry_by_filter_acts_on_the_runs_the_filter_selects(operator, runs):
    body = {"action": "retry", "reason": "outage over", "filter": {"status": "FAILED,SUCCEEDED"}}
    data = operator.post(BULK, body, format="json").json()
    assert data["run_ids"]["retried"] == [str(runs["failed"].id)]
    assert data["run_ids"]["not_applicable"] == [str(runs["done"].id)]
    assert Run.objects.get(id=runs["failed"].id).status == RunStatus.PENDING
    assert Run.objects.get(id=runs["pending"].id).status == RunStatus.PENDING  # not selected


def test_a_dry_run_writes_nothing_and_answers_counts_and_ids_per_outcome(operator, runs):
    before = written()
    data = operator.post(BULK, {"action": "cancel", "reason": "x", "dry_run": True, "filter": {}},
                         format="json").json()
    assert written() == before
    assert (data["dry_run"], data["bulk_id"]) == (True, None)
    assert data["counts"] == {"would_cancel": 1, "not_applicable": 2, "skipped": 0, "not_found": 0}
    assert data["run_ids"]["would_cancel"] == [str(runs["pending"].id)]


@pytest.mark.parametrize("body, field", [
    ({"action": "delete", "reason": "r", "run_ids": []}, "action"),
    ({"reason": "r", "filter": {}}, "action"),
    ({"action": "cancel", "reason": "", "filter": {}}, "reason"),
    ({"action": "cancel", "reason": "   ", "filter": {}}, "reason"),
    ({"action": "cancel", "filter": {}}, "reason"),
    ({"action": "cancel", "reason": "r", "run_ids": ["not-a-uuid"]}, "run_ids"),
    ({"action": "cancel", "reason": "r", "run_ids": []}, "run_ids"),
    ({"action": "cancel", "reason": "r"}, "run_ids"),
    ({"action": "cancel", "reason": "r", "run_ids": [str(uuid.uuid4())], "filter": {}}, "filter"),
    ({"action": "cancel", "reason": "r", "filter": {"status": "DONE"}}, "filter"),
    ({"action": "cancel", "reason": "r", "filter": {"stauts": "FAILED"}}, "filter"),
    ({"action": "cancel", "reason": "r", "filter": "FAILED"}, "filter"),
    ({"action": "cancel", "reason": "r", "filter": {}, "dry_run": "perhaps"}, "dry_run"),
])
def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(operator, runs, body, field):
    before = written()
    answer = operator.post(BULK, body, format="json")
    assert answer.status_code == 400 and field in answer.json(), answer.json()
    assert written() == before


def test_more_runs_than_the_limit_is_a_400_saying_the_limit(operator, runs, settings):
    settings.DURABLE_BULK_LIMIT = 2
    by_ids = operator.post(BULK, {"action": "retry", "reason": "r", "run_ids": [str(uuid.uuid4()) for _ in range(3)]},
                           format="json")
    by_filter = operator.post(BULK, {"action": "retry", "reason": "r", "filter": {}}, format="json")
    assert by_ids.status_code == by_filter.status_code == 400
    assert "at most 2 runs at once (DURABLE_BULK_LIMIT)" in by_ids.json()["run_ids"][0]
    assert "more than 2 runs match" in by_filter.json()["filter"][0]


@pytest.mark.parametrize("action, holds", [("cancel", "durable.retry_run"), ("retry", "durable.cancel_run")])
def test_the_single_run_actions_permission_is_needed(runs, action, holds):
    before = written()
    answer = client_of(holds).post(BULK, {"action": action, "reason": "r", "filter": {}, "dry_run": True},
                                   format="json")
    assert answer.status_code == 403 and f"durable.{action}_run" in answer.json()["detail"]
    assert written() == before


def test_a_caller_without_view_run_is_refused_and_anonymous_is_not_let_in(runs):
    nobody = APIClient()
    nobody.force_authenticate(make_user("nobody", "durable.cancel_run"))
    assert nobody.post(BULK, {"action": "cancel", "reason": "r", "filter": {}}, format="json").status_code == 403
    assert_unauthenticated(APIClient().post(BULK, {"action": "cancel", "reason": "r", "filter": {}}, format="json"))
    assert Run.objects.filter(status=RunStatus.CANCELLED).count() == 0
