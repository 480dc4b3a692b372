"""What runs cost, in the console: tokens and cost per step visit and for the run on its page, the runs list and
the overview sorted and filtered by cost, and raising the budget of a run its budget stopped."""
import html as markup
import re
from decimal import Decimal

import pytest
from django.urls import reverse

from durable.console import views
from durable.engine.states import RunStatus
from durable.models import Run
from durable.permissions import CONTENTS_PERMISSIONS
from durable.roles import OPERATOR
from tests.audit import operator_actions
from tests.conftest import make_user, user_with_roles
from tests.durable.console.screens import HTMX, VIEW, action_url, client_for, detail_url, run_in, runs_url
from tests.durable.cost_workflows import PRICES, stopped_by_budget

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _prices(settings):
    settings.DURABLE_LLM_PRICES = PRICES


@pytest.fixture
def stopped(tmp_path) -> Run:
    return stopped_by_budget(str(tmp_path / "calls"))


@pytest.fixture
def ops():
    return client_for(user_with_roles("ops", OPERATOR))


def confirmed(**fields):
    return {"reason": "the customer is worth it", "confirm": "on", **fields}


def text(html: str) -> str:
    return re.sub(r"\s+", " ", markup.unescape(re.sub(r"<[^>]+>", " ", html)))


# -- The run's page ------------------------------------------------------------------------------------------------

def test_the_run_page_shows_tokens_and_cost_per_step_visit_and_for_the_run_with_its_budget(ops, stopped):
    page = text(ops.get(detail_url(stopped)).content.decode())
    assert "Model calls LLM tokens 360 (300 in, 60 out) Cost 0.000081 Budget 300 LLM tokens" in page
    assert ("Step visit Model calls Input LLM tokens Output LLM tokens Cost think #1 1 100 20 0.000027 "
            "think #2 1 100 20 0.000027 think #3 1 100 20 0.000027") in page
    assert "activity llm.chat #0 recorded; model test-model, 100 in + 20 out tokens, cost 0.000027" in page
    assert ("Stopped by its budget before a model call: the run used 360 tokens of its budget of 300 tokens before "
            "model call 'llm.chat'") in page


def test_without_the_contents_permissions_the_page_shows_the_run_s_totals_not_its_visits(stopped):
    page = text(client_for(make_user("watcher", VIEW)).get(detail_url(stopped)).content.decode())
    assert "LLM tokens 360 (300 in, 60 out) Cost 0.000081" in page and "Step visit" not in page


def test_a_model_without_a_price_shows_its_cost_as_unknown_never_0(ops, tmp_path, settings):
    settings.DURABLE_LLM_PRICES = {}
    run = stopped_by_budget(str(tmp_path / "calls"))
    Run.objects.filter(id=run.id).update(cost=0, unpriced_tokens=360)
    page = text(ops.get(detail_url(run)).content.decode())
    assert "Cost unknown for 360 tokens of models without a price" in page


def test_a_run_without_model_calls_or_budget_shows_no_spending_panel(ops):
    assert 'id="spending"' not in ops.get(detail_url(run_in(RunStatus.PENDING))).content.decode()


# -- Raising the budget --------------------------------------------------------------------------------------------

def test_the_raise_is_offered_to_who_may_raise_it_and_only_while_the_run_waits_on_its_budget(ops, stopped):
    assert "Raise the budget" in ops.get(detail_url(stopped)).content.decode()
    steerer = client_for(make_user("steerer", VIEW, *CONTENTS_PERMISSIONS, "durable.cancel_run"))
    assert "Raise the budget" not in steerer.get(detail_url(stopped)).content.decode()
    unknown = run_in(RunStatus.NEEDS_ATTENTION, business_key="unknown-op", error={"kind": "unknown_side_effect"})
    assert "Raise the budget" not in ops.get(detail_url(unknown)).content.decode()


def test_a_confirmed_raise_resumes_the_run_audited_from_the_console(ops, stopped):
    response = ops.post(action_url(stopped, "budget"), confirmed(tokens="1000"))
    assert (response.status_code, response["Location"]) == (302, detail_url(stopped))
    stopped.refresh_from_db()
    assert (stopped.status, stopped.budget_tokens) == (RunStatus.PENDING, 1000)
    action = operator_actions().get(run=stopped)
    assert (action.action, action.source, action.reason) == ("raise_budget", "console", "the customer is worth it")


@pytest.mark.parametrize(("form", "says"), [
    (confirmed(), "give the new LLM-token budget, the new cost budget, or both"),
    (confirmed(tokens="200"), "must be above the run's token budget, 300 tokens"),
    (confirmed(tokens="330"), "must be above what the run has used, 360 tokens"),
    (confirmed(cost="1"), "the run has no cost budget to raise"),
    (confirmed(cost="lots"), "Enter a number."),
    ({"reason": "", "tokens": "1000"}, "tick “I confirm” to go ahead"),
])
def test_a_raise_that_is_not_one_is_a_400_on_the_form_and_changes_nothing(ops, stopped, form, says):
    response = ops.post(action_url(stopped, "budget"), form, **HTMX)
    html = response.content.decode()
    assert response.status_code == 400 and says in text(html), text(html)
    assert '<details class="run-action" open>' in html
    stopped.refresh_from_db()
    assert (stopped.status, stopped.budget_tokens) == (RunStatus.NEEDS_ATTENTION, 300)
    assert not operator_actions().exists()


def test_a_raise_of_a_run_no_longer_waiting_on_its_budget_is_a_409(ops, stopped):
    assert ops.post(action_url(stopped, "budget"), confirmed(tokens="1000")).status_code == 302
    again = ops.post(action_url(stopped, "budget"), confirmed(tokens="2000"), **HTMX)
    assert again.status_code == 409 and "does not wait on its budget" in again.content.decode()


def test_a_raise_without_the_permission_is_forbidden(stopped):
    client = client_for(make_user("steerer", VIEW, "durable.cancel_run"))
    assert client.post(action_url(stopped, "budget"), confirmed(tokens="1000")).status_code == 403
    stopped.refresh_from_db()
    assert stopped.status == RunStatus.NEEDS_ATTENTION


# -- The runs list and the overview --------------------------------------------------------------------------------

def costly_runs() -> None:
    run_in(RunStatus.SUCCEEDED, business_key="cheap", input_tokens=10, cost=Decimal("0.01"))
    run_in(RunStatus.SUCCEEDED, business_key="dear", input_tokens=5, output_tokens=1, cost=Decimal("2.5"))
    run_in(RunStatus.SUCCEEDED, business_key="middling", input_tokens=900, cost=Decimal("0.4"))


def listed(client, query: str) -> list[str]:
    response = client.get(f"{runs_url()}?{query}", **HTMX)
    assert response.status_code == 200, response.content.decode()
    return re.findall(r"<td>(cheap|dear|middling)</td>", response.content.decode())


def test_the_runs_list_shows_tokens_and_cost_and_sorts_and_filters_by_them(ops):
    costly_runs()
    row = text(ops.get(runs_url()).content.decode())
    assert "LLM tokens Cost" in row and "dear SUCCEEDED" in row
    assert listed(ops, "order=cost") == ["dear", "middling", "cheap"]
    assert listed(ops, "order=tokens") == ["middling", "cheap", "dear"]
    assert listed(ops, "order=cost&cost_min=0.4") == ["dear", "middling"]


def test_sorted_by_cost_the_runs_list_pages_in_that_order(ops, monkeypatch):
    monkeypatch.setattr(views, "PAGE", 2)
    costly_runs()
    first = ops.get(f"{runs_url()}?order=cost", **HTMX).content.decode()
    assert re.findall(r"<td>(cheap|dear|middling)</td>", first) == ["dear", "middling"]
    next_page = re.search(r'class="next-page"', first) and re.search(r'href="([^"]+)"[^>]*class="next-page"', first)
    assert next_page is not None
    second = ops.get(next_page.group(1).replace("&amp;", "&"), **HTMX).content.decode()
    assert re.findall(r"<td>(cheap|dear|middling)</td>", second) == ["cheap"]


def test_a_bad_cost_filter_or_page_is_a_400_naming_it(ops):
    assert "Cost at least:" in ops.get(f"{runs_url()}?cost_min=lots").content.decode()
    refused = ops.get(f"{runs_url()}?order=cost&after=2026-01-01T00:00:00%2B00:00~x")
    assert refused.status_code == 400 and "Page: not a page of this list" in refused.content.decode()


def test_the_overview_counts_the_runs_waiting_on_their_budget_and_the_last_day_s_spending(ops, stopped):
    page = ops.get(reverse("durable:overview")).content.decode()
    assert re.search(r'waiting_on_budget=true" class="budget-runs">1 run</a>', page)
    assert "Model calls of the runs started 360 LLM tokens cost 0.000081" in text(page)
    assert "order=cost" in page
    assert listed(ops, "waiting_on_budget=true") == [] and stopped.business_key in ops.get(
        f"{runs_url()}?waiting_on_budget=true").content.decode()
