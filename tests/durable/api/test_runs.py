"""The runs REST API: who may do what, starting runs, listing and reading them, steering them."""
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from durable import services
from durable.engine.states import RunStatus
from durable.errors import InvalidInput
from durable.models import Run, SideEffect
from durable.permissions import CONTENTS_PERMISSIONS
from durable.runtime import executor
from tests.audit import operator_actions
from tests.conftest import ALL_RUN_PERMS, api_token, assert_unauthenticated, make_user

pytestmark = pytest.mark.django_db

RUNS = "/api/runs/"
CLAIM = {"order_id": "ORD-1001", "customer_message": "Please refund ORD-1001, it arrived broken."}
START = {"workflow": "claims-agent", "input": CLAIM, "business_key": "ORD-1001"}

# (action, method, url, permission it needs)
ENDPOINTS = [
    ("list", "get", RUNS, "durable.view_run"),
    ("retrieve", "get", RUNS + "{id}/", "durable.view_run"),
    ("create", "post", RUNS, "durable.start_run"),
    ("cancel", "post", RUNS + "{id}/cancel/", "durable.cancel_run"),
    ("retry", "post", RUNS + "{id}/retry/", "durable.retry_run"),
    ("resume", "post", RUNS + "{id}/resume/", "durable.resume_run"),
]


def run_in(status=RunStatus.PENDING, *, workflow="test-trivial", business_key="k", **fields):
    run, _ = services.start_run(workflow=workflow, input=CLAIM if workflow == "claims-agent" else {},
                                business_key=business_key)
    Run.objects.filter(id=run.id).update(status=status, **fields)
    run.refresh_from_db()
    return run


def call(client, method, url, run):
    url = url.format(id=run.id)
    if method == "post":
        return client.post(url, START if url == RUNS else {}, format="json")
    return client.get(url)


def ids(response):
    return {item["id"] for item in response.data["results"]}


# Who may do what


@pytest.mark.parametrize("action,method,url,perm", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_anonymous_clients_are_refused_on_every_endpoint(action, method, url, perm):
    run = run_in(RunStatus.FAILED)
    response = call(APIClient(), method, url, run)
    assert_unauthenticated(response)
    assert Run.objects.count() == 1 and Run.objects.get().status == RunStatus.FAILED


def test_anonymous_clients_cannot_read_the_schema():
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")  # the refusal in JSON, not YAML
    assert_unauthenticated(response)


@pytest.mark.parametrize("action,method,url,perm", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_a_user_without_the_actions_permission_is_forbidden(action, method, url, perm):
    run = run_in(RunStatus.FAILED)
    user = make_user("almost", *[p for p in ALL_RUN_PERMS if p != perm])
    client = APIClient()
    client.force_authenticate(user)
    response = call(client, method, url, run)
    assert response.status_code == 403
    assert Run.objects.count() == 1 and Run.objects.get().status == RunStatus.FAILED
    assert not operator_actions().exists()


@pytest.mark.parametrize("action,method,url,perm", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_the_one_permission_an_action_needs_is_enough(action, method, url, perm):
    run = run_in({"cancel": RunStatus.PENDING, "resume": RunStatus.BLOCKED_VERSION}.get(action, RunStatus.FAILED))
    client = APIClient()
    client.force_authenticate(make_user("just-enough", perm))
    assert call(client, method, url, run).status_code == (201 if action == "create" else 200)


def test_a_token_authenticates_api_clients():
    run = run_in()
    token = api_token(make_user("robot", "durable.view_run"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get(RUNS)
    assert response.status_code == 200 and ids(response) == {str(run.id)}


def test_a_wrong_token_is_refused():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_unauthenticated(client.get(RUNS), "Invalid token.")


# Starting runs


def test_post_starts_a_run_and_answers_201_with_it(api, operator):
    response = api.post(RUNS, START, format="json")
    assert response.status_code == 201
    run = Run.objects.get()
    body = response.data
    assert body["id"] == str(run.id) and body["url"].endswith(f"{RUNS}{run.id}/")
    assert (body["workflow_name"], body["workflow_version"], body["status"], body["business_key"]) == (
        "claims-agent", 2, RunStatus.PENDING, "ORD-1001")
    assert body["input"] == CLAIM and body["current_step"] == "planner"
    assert run.created_by == operator and run.checkpoints.count() == 1


def test_a_retried_post_with_the_same_idempotency_key_header_returns_the_same_run_with_200(api):
    first = api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="req-42")
    again = api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="req-42")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.data["id"] == first.data["id"] and again.data["idempotency_key"] == "req-42"
    assert Run.objects.count() == 1


def test_the_idempotency_key_may_also_come_in_the_body(api):
    first = api.post(RUNS, {**START, "idempotency_key": "req-43"}, format="json")
    again = api.post(RUNS, {**START, "idempotency_key": "req-43"}, format="json")
    header = api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="req-43")
    assert (first.status_code, again.status_code, header.status_code) == (201, 200, 200)
    assert first.data["id"] == again.data["id"] == header.data["id"]
    assert Run.objects.count() == 1


def test_an_idempotency_key_longer_than_200_characters_is_a_400_from_header_or_body(api):
    header = api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="x" * 201)
    body = api.post(RUNS, {**START, "idempotency_key": "x" * 201}, format="json")
    assert (header.status_code, body.status_code) == (400, 400)
    assert "idempotency_key" in header.data and "idempotency_key" in body.data
    assert Run.objects.count() == 0
    assert api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="x" * 200).status_code == 201


def test_a_different_request_with_a_used_idempotency_key_is_a_409(api):
    first = api.post(RUNS, START, format="json", HTTP_IDEMPOTENCY_KEY="req-44")
    other = api.post(RUNS, {**START, "business_key": "ORD-2"}, format="json", HTTP_IDEMPOTENCY_KEY="req-44")
    assert other.status_code == 409
    assert other.data["current_status"] == RunStatus.PENDING
    assert first.data["id"] in other.data["detail"]
    assert Run.objects.count() == 1


def test_invalid_input_is_a_400_naming_the_field_and_writes_nothing(api):
    response = api.post(RUNS, {**START, "input": {"order_id": "1001", "customer_message": "hi"}}, format="json")
    assert response.status_code == 400
    assert list(response.data) == ["input"] and list(response.data["input"]) == ["order_id"]
    assert "pattern" in str(response.data["input"]["order_id"][0])
    assert Run.objects.count() == 0


def test_a_missing_business_key_is_a_400_naming_it(api):
    response = api.post(RUNS, {"workflow": "claims-agent", "input": CLAIM}, format="json")
    assert response.status_code == 400 and "business_key" in response.data
    assert Run.objects.count() == 0


def test_an_unknown_workflow_is_a_400_naming_the_workflow(api):
    response = api.post(RUNS, {**START, "workflow": "no-such-workflow"}, format="json")
    assert response.status_code == 400 and list(response.data) == ["workflow"]
    assert "no-such-workflow" in str(response.data["workflow"][0])
    assert Run.objects.count() == 0


@pytest.mark.parametrize("bad_input", [["ORD-1001"], "ORD-1001", 42, None])
def test_input_that_is_not_a_json_object_is_a_400(api, bad_input):
    response = api.post(RUNS, {**START, "input": bad_input}, format="json")
    assert response.status_code == 400 and "input" in response.data
    assert Run.objects.count() == 0


# Listing


def test_list_filters_by_one_or_several_statuses(api):
    failed = run_in(RunStatus.FAILED)
    succeeded = run_in(RunStatus.SUCCEEDED)
    run_in(RunStatus.PENDING)
    assert ids(api.get(RUNS, {"status": "FAILED"})) == {str(failed.id)}
    assert ids(api.get(RUNS, {"status": "failed, SUCCEEDED"})) == {str(failed.id), str(succeeded.id)}


def test_an_unknown_status_filter_is_a_400_naming_status(api):
    response = api.get(RUNS, {"status": "FAILED,DONE"})
    assert response.status_code == 400 and list(response.data) == ["status"]
    assert "DONE" in str(response.data["status"][0])


def test_list_filters_by_workflow_version_and_business_key(api):
    trivial = run_in(business_key="A")
    claim = run_in(workflow="claims-agent", business_key="B")
    Run.objects.filter(id=claim.id).update(workflow_version=2)
    assert ids(api.get(RUNS, {"workflow": "claims-agent"})) == {str(claim.id)}
    assert ids(api.get(RUNS, {"version": 2})) == {str(claim.id)}
    assert ids(api.get(RUNS, {"version": 1})) == {str(trivial.id)}
    assert ids(api.get(RUNS, {"business_key": "A"})) == {str(trivial.id)}
    assert ids(api.get(RUNS, {"workflow": "test-trivial", "business_key": "B"})) == set()


def test_a_version_that_is_not_a_positive_number_is_a_400_naming_version(api):
    for bad in ("zero", "0"):
        response = api.get(RUNS, {"version": bad})
        assert response.status_code == 400 and list(response.data) == ["version"]


def test_list_filters_by_creation_time(api):
    now = timezone.now()
    old, middle, new = run_in(), run_in(), run_in()
    for run, hours in ((old, 48), (middle, 24), (new, 1)):
        Run.objects.filter(id=run.id).update(created_at=now - timedelta(hours=hours))
    after = (now - timedelta(hours=30)).isoformat()
    before = (now - timedelta(hours=2)).isoformat()
    assert ids(api.get(RUNS, {"created_after": after})) == {str(middle.id), str(new.id)}
    assert ids(api.get(RUNS, {"created_before": before})) == {str(old.id), str(middle.id)}
    assert ids(api.get(RUNS, {"created_after": after, "created_before": before})) == {str(middle.id)}
    refused = api.get(RUNS, {"created_after": "yesterday"})
    assert refused.status_code == 400 and list(refused.data) == ["created_after"]


def test_list_is_newest_first(api):
    runs = [run_in() for _ in range(3)]
    now = timezone.now()
    for age, run in enumerate(runs):
        Run.objects.filter(id=run.id).update(created_at=now - timedelta(minutes=age))
    assert [r["id"] for r in api.get(RUNS).data["results"]] == [str(r.id) for r in runs]


def follow_pages(api, url):
    seen, pages = [], 0
    while url:
        response = api.get(url)
        assert response.status_code == 200
        assert len(response.data["results"]) <= 2
        seen += [item["id"] for item in response.data["results"]]
        url, pages = response.data["next"], pages + 1
    return seen, pages


def test_cursor_pagination_walks_every_run_exactly_once(api):
    runs = [run_in() for _ in range(5)]
    now = timezone.now()
    for age, run in enumerate(runs):
        Run.objects.filter(id=run.id).update(created_at=now - timedelta(seconds=age))
    seen, pages = follow_pages(api, RUNS + "?page_size=2")
    assert seen == [str(r.id) for r in runs]  # newest first, no duplicates, none missing
    assert pages == 3


def test_cursor_pagination_is_complete_even_when_runs_share_a_creation_time(api):
    runs = [run_in() for _ in range(5)]
    Run.objects.update(created_at=timezone.now())
    seen, _ = follow_pages(api, RUNS + "?page_size=2")
    assert sorted(seen) == sorted(str(r.id) for r in runs)


def test_pagination_keeps_the_filters(api):
    failed = [run_in(RunStatus.FAILED) for _ in range(3)]
    run_in(RunStatus.PENDING)
    seen, _ = follow_pages(api, RUNS + "?page_size=2&status=FAILED")
    assert sorted(seen) == sorted(str(r.id) for r in failed)


# Reading one run


def test_detail_shows_checkpoints_journal_and_side_effects_under_the_contents_rule(calls_file):
    """Who may not see them: tests/test_contents_rule.py."""
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="b")
    executor.advance(run.id)
    SideEffect.objects.create(operation_id="a" * 32, run=run, step="s3", action_name="refund", business_key="b",
                              request_hash="h" * 64, status="SUCCEEDED", external_ref="re_1")
    api = APIClient()
    api.force_authenticate(make_user("reader", "durable.view_run", *CONTENTS_PERMISSIONS))
    response = api.get(f"{RUNS}{run.id}/")
    assert response.status_code == 200
    body = response.data
    assert body["status"] == RunStatus.SUCCEEDED
    assert [(c["seq"], c["step"], c["next_step"]) for c in body["checkpoints"]] == [
        (0, "", "s1"), (1, "s1", "s2"), (2, "s2", "s3"), (3, "s3", "")]
    activities = [(e["step"], e["call_index"], e["name"], e["result"]) for e in body["journal"] if e["kind"] == "activity"]
    assert activities == [("s1", 0, "a1", "a1-result"), ("s2", 0, "a2", "a2-result"),
                          ("s3", 0, "a3", "a3-result"), ("s3", 1, "a4", "a4-result")]
    assert [(s["operation_id"], s["action_name"], s["status"], s["external_ref"]) for s in body["side_effects"]] == [
        ("a" * 32, "refund", "SUCCEEDED", "re_1")]


def test_the_journal_names_the_visit_each_entry_belongs_to(tmp_path):
    from tests.durable import visit_workflows  # noqa: F401 (registers them)
    run, _ = services.start_run(workflow="test-visit-loop", input={"calls_file": str(tmp_path / "c"), "rounds": 2},
                                business_key="v")
    executor.advance(run.id)
    api = APIClient()
    api.force_authenticate(make_user("reader", "durable.view_run", *CONTENTS_PERMISSIONS))
    body = api.get(f"{RUNS}{run.id}/").data
    assert [(e["step"], e["visit"], e["name"]) for e in body["journal"] if e["kind"] == "activity"] == [
        ("act", 0, "ask"), ("act", 1, "ask")]  # visits by the checkpoint they started from


def test_a_run_that_succeeded_after_a_retry_answers_no_error_and_its_journal_holds_the_retrys(calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, "fail_times": 1},
                                business_key="b")
    executor.advance(run.id)
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    executor.advance(run.id)
    api = APIClient()
    api.force_authenticate(make_user("reader", "durable.view_run", *CONTENTS_PERMISSIONS))
    body = api.get(f"{RUNS}{run.id}/").data
    assert body["status"] == RunStatus.SUCCEEDED and body["error"] is None
    [retry] = [e for e in body["journal"] if e["kind"] == "retry_scheduled"]
    assert retry["detail"]["error"]["kind"] == "transient"
    assert api.get(RUNS).data["results"][0]["error"] is None


def test_the_list_does_not_carry_the_detail_collections(api):
    run_in()
    item = api.get(RUNS).data["results"][0]
    assert not {"checkpoints", "journal", "side_effects"} & set(item)


def test_detail_of_an_unknown_run_is_a_404(api):
    assert api.get(f"{RUNS}00000000-0000-0000-0000-000000000000/").status_code == 404


# Steering


@pytest.mark.parametrize("action,before,after", [
    ("cancel", RunStatus.PENDING, RunStatus.CANCELLED),
    ("cancel", RunStatus.WAITING_APPROVAL, RunStatus.CANCELLED),
    ("retry", RunStatus.FAILED, RunStatus.PENDING),
    ("retry", RunStatus.WAITING_RETRY, RunStatus.PENDING),
    ("resume", RunStatus.BLOCKED_VERSION, RunStatus.PENDING),
])
def test_steering_a_run_in_an_allowed_state_answers_200_with_the_new_status(api, operator, action, before, after):
    run = run_in(before)
    response = api.post(f"{RUNS}{run.id}/{action}/", {"reason": "ticket 123"}, format="json")
    assert response.status_code == 200 and response.data["status"] == after
    assert response.data["id"] == str(run.id)
    audit = operator_actions().get(run=run)
    assert (audit.actor, audit.action, audit.source, audit.reason) == (operator, action, "api", "ticket 123")
    assert (audit.status_before, audit.status_after) == (before, after)


def test_steering_without_a_reason_is_allowed(api):
    run = run_in(RunStatus.PENDING)
    assert api.post(f"{RUNS}{run.id}/cancel/").status_code == 200
    assert operator_actions().get(run=run).reason == ""


@pytest.mark.parametrize("action,current", [
    ("cancel", RunStatus.SUCCEEDED),
    ("cancel", RunStatus.CANCELLED),
    ("retry", RunStatus.PENDING),
    ("retry", RunStatus.SUCCEEDED),
    ("resume", RunStatus.RUNNING),
    ("resume", RunStatus.FAILED),
])
def test_steering_a_run_in_a_state_that_forbids_it_is_a_409_with_the_current_status(api, action, current):
    run = run_in(current)
    response = api.post(f"{RUNS}{run.id}/{action}/", format="json")
    assert response.status_code == 409
    assert response.data["current_status"] == current and current in response.data["detail"]
    assert Run.objects.get(id=run.id).status == current
    assert not operator_actions().exists()


def test_steering_an_unknown_run_is_a_404(api):
    assert api.post(f"{RUNS}00000000-0000-0000-0000-000000000000/cancel/").status_code == 404


# The schema


def test_the_openapi_schema_describes_the_runs_api(api):
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert {"/api/runs/", "/api/runs/{id}/", "/api/runs/{id}/cancel/"} <= set(schema["paths"])
    assert {"get", "post"} <= set(schema["paths"]["/api/runs/"])


# -- Priority (docs/workflows.md, "Limits and priority") -----------------------------------------------------------

def test_a_run_is_started_with_a_priority_it_shows(api):
    response = api.post(RUNS, {**START, "priority": 10}, format="json")
    assert response.status_code == 201, response.data
    assert response.data["priority"] == 10 and Run.objects.get().priority == 10
    response = api.post(RUNS, {**START, "business_key": "ORD-1002", "input": {**CLAIM, "order_id": "ORD-1002"}},
                        format="json")
    assert response.data["priority"] == 0  # by default


@pytest.mark.parametrize("priority", [101, -101, "high", 1.5, True, None])
def test_a_priority_that_is_not_a_whole_number_from_minus_100_to_100_is_a_400_naming_it(api, priority):
    response = api.post(RUNS, {**START, "priority": priority}, format="json")
    assert response.status_code == 400 and list(response.data) == ["priority"], response.data
    assert str(response.data["priority"][0]).startswith("Priority:")
    assert Run.objects.count() == 0


def test_the_service_refuses_a_priority_out_of_range_naming_it():
    with pytest.raises(InvalidInput) as refused:
        services.start_run(workflow="claims-agent", input=CLAIM, business_key="ORD-1001", priority=500)
    assert "priority" in refused.value.errors
