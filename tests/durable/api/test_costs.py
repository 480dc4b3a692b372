"""What runs cost, through the API: each run's tokens, cost and budget, the list sorted and filtered by them, and
raising the budget of a run its budget stopped (POST /api/runs/{id}/budget/)."""
import base64
from decimal import Decimal
from urllib.parse import quote, urlencode

import pytest
from rest_framework.test import APIClient

from durable.engine.states import RunStatus
from durable.models import Run
from durable.roles import OPERATOR
from tests.audit import operator_actions
from tests.conftest import api_token, make_user, user_with_roles
from tests.durable.api.test_runs import run_in
from tests.durable.cost_workflows import stopped_by_budget

pytestmark = pytest.mark.django_db

RUNS = "/api/runs/"


@pytest.fixture
def api(db) -> APIClient:
    """As the operator role: it reads runs and their contents, and may raise a run's budget."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user_with_roles('ops', OPERATOR))}")
    return client


@pytest.fixture
def stopped(tmp_path) -> Run:
    return stopped_by_budget(str(tmp_path / "calls"))


def budget_url(run: Run) -> str:
    return f"{RUNS}{run.id}/budget/"


def test_a_run_says_what_its_model_calls_used_and_cost_and_its_budget(api, stopped):
    body = api.get(f"{RUNS}{stopped.id}/").json()
    assert (body["input_tokens"], body["output_tokens"], body["cost"], body["unpriced_tokens"]) == (
        300, 60, "0.000081", 0)
    assert (body["budget_tokens"], body["budget_cost"]) == (300, None)
    assert body["error"]["kind"] == "budget_exhausted"
    by_visit = [(v["step"], v["visit"], v["visit_number"], v["model_calls"], v["tokens"], v["cost"])
                for v in body["spending_by_visit"]]
    assert by_visit == [("think", 0, 1, 1, 120, "0.000027"), ("think", 1, 2, 1, 120, "0.000027"),
                        ("think", 2, 3, 1, 120, "0.000027")]
    usage = [entry["detail"]["usage"] for entry in body["journal"] if entry["kind"] == "activity"]
    assert usage[0] == {"model": "test-model", "input_tokens": 100, "output_tokens": 20, "cost": "0.000027"}


def test_the_list_sorts_by_cost_or_tokens_and_filters_by_them(api):
    run_in(business_key="cheap", input_tokens=10, cost=Decimal("0.01"))
    run_in(business_key="dear", input_tokens=5, output_tokens=1, cost=Decimal("2.5"))
    run_in(business_key="middling", input_tokens=900, cost=Decimal("0.4"))
    run_in(business_key="free")

    def listed(query: str) -> list[str]:
        response = api.get(f"{RUNS}?{query}")
        assert response.status_code == 200, response.json()
        return [item["business_key"] for item in response.json()["results"]]

    assert listed("order=cost") == ["dear", "middling", "cheap", "free"]
    assert listed("order=tokens") == ["middling", "cheap", "dear", "free"]
    assert listed("order=cost&cost_min=0.4") == ["dear", "middling"]
    assert listed("order=tokens&tokens_min=10") == ["middling", "cheap"]
    assert set(listed("")) == {"cheap", "dear", "middling", "free"}
    pages, url = [], f"{RUNS}?order=cost&page_size=1"
    while url:  # the cursor follows the order, a page at a time
        page = api.get(url).json()
        pages += [item["business_key"] for item in page["results"]]
        url = page["next"]
    assert pages == ["dear", "middling", "cheap", "free"]


@pytest.mark.parametrize(("query", "field"), [("order=priciest", "order"), ("cost_min=-1", "cost_min"),
                                              ("cost_min=lots", "cost_min"), ("tokens_min=1.5", "tokens_min")])
def test_a_bad_order_or_cost_filter_is_a_400_naming_it(api, query, field):
    response = api.get(f"{RUNS}?{query}")
    assert response.status_code == 400 and field in response.json()


def test_the_list_finds_the_runs_waiting_on_their_budget(api, stopped):
    run_in(RunStatus.NEEDS_ATTENTION, business_key="unknown-op", error={"kind": "unknown_side_effect"})
    found = api.get(f"{RUNS}?waiting_on_budget=true").json()["results"]
    assert [item["id"] for item in found] == [str(stopped.id)]


def test_raising_the_budget_resumes_the_run_and_is_audited(api, stopped):
    response = api.post(budget_url(stopped), {"tokens": 1000, "reason": "the customer is worth it"}, format="json")
    assert response.status_code == 200, response.json()
    assert (response.json()["status"], response.json()["budget_tokens"], response.json()["error"]) == (
        "PENDING", 1000, None)
    audit = operator_actions().get(run=stopped, action="raise_budget")
    assert (audit.source, audit.status_before, audit.status_after) == ("api", "NEEDS_ATTENTION", "PENDING")
    assert audit.detail["budget_after"] == {"tokens": 1000, "cost": None}
    assert audit.detail["spent"]["tokens"] == 360


@pytest.mark.parametrize(("body", "field", "says"), [
    ({}, "tokens", "give the new LLM-token budget"),
    ({"tokens": 300}, "tokens", "above the run's token budget, 300 tokens"),
    ({"tokens": 350}, "tokens", "above what the run has used, 360 tokens"),
    ({"tokens": 0}, "tokens", "greater than or equal to 1"),
    ({"tokens": "many"}, "tokens", "valid integer"),
    ({"cost": "5"}, "cost", "no cost budget to raise"),
    ({"cost": "-1"}, "cost", "greater than or equal to 0"),
    ({"tokens": 1000, "reason": "x" * 4001}, "reason", "4000"),
])
def test_a_budget_not_raised_enough_or_not_a_budget_is_a_400_naming_the_field_and_changes_nothing(
        api, stopped, body, field, says):
    response = api.post(budget_url(stopped), body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert says in " ".join(response.json()[field])
    stopped.refresh_from_db()
    assert (stopped.status, stopped.budget_tokens) == (RunStatus.NEEDS_ATTENTION, 300)
    assert not operator_actions().filter(action="raise_budget").exists()


def test_raising_the_budget_of_a_run_that_does_not_wait_on_it_is_a_409(api, stopped):
    assert api.post(budget_url(stopped), {"tokens": 1000}, format="json").status_code == 200
    again = api.post(budget_url(stopped), {"tokens": 2000}, format="json")
    assert again.status_code == 409 and again.json()["current_status"] == "PENDING"
    unknown = run_in(RunStatus.NEEDS_ATTENTION, business_key="unknown-op", error={"kind": "unknown_side_effect"})
    assert api.post(budget_url(unknown), {"tokens": 2000}, format="json").status_code == 409


def test_raising_the_budget_needs_the_raise_budget_permission(stopped):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(make_user('watcher', 'durable.view_run'))}")
    response = client.post(budget_url(stopped), {"tokens": 1000}, format="json")
    assert response.status_code == 403 and "durable.raise_budget" in response.json()["detail"]
    stopped.refresh_from_db()
    assert stopped.status == RunStatus.NEEDS_ATTENTION


@pytest.mark.parametrize(("order", "position"), [("cost", "NaN"), ("cost", "1e999"), ("tokens", "9" * 30),
                                                 ("tokens", "many"), ("", "yesterday")])
def test_a_cursor_whose_position_its_order_cannot_hold_is_a_400_naming_the_cursor(api, order, position):
    cursor = base64.b64encode(urlencode({"p": position}).encode()).decode()
    response = api.get(f"{RUNS}?order={order}&cursor={quote(cursor)}")
    assert response.status_code == 400 and list(response.json()) == ["cursor"]
