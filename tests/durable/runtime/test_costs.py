"""What every run costs (docs/workflows.md, "Model calls and budgets"): a model call's usage is recorded and priced
with its result, counted once whatever replays it, and a run that reached its budget stops before its next model
call, waits for an operator, and goes on once its budget is raised."""
import re
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, NotificationEvent, OperatorAction, Run
from tests.conftest import user_with_roles
from tests.durable.claims import advance
from tests.durable.cost_workflows import CALL_COST, INPUT_TOKENS, MODEL, OUTPUT_TOKENS, PRICES
from tests.durable.ledger_workflows import SimulatedCrash, crash_before_checkpoint, expire_lease
from tests.durable.metered import counting
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight
CALL_TOKENS = INPUT_TOKENS + OUTPUT_TOKENS
SETS_SPENDING = re.compile(r'\binput_tokens"?\s*=')  # an UPDATE of the run's spending, ORM's or plain SQL


@pytest.fixture(autouse=True)
def _prices(settings):
    settings.DURABLE_LLM_PRICES = PRICES


def start(workflow: str, calls_file, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(calls_file), **given},
                                business_key="COST-1")
    return run


def usages(run: Run) -> list[tuple[str, int, dict]]:
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).order_by("visit", "call_index")
    return [(name, visit, (detail or {}).get("usage")) for name, visit, detail in rows.values_list("name", "visit", "detail")]


def totals(run: Run) -> tuple[int, int, Decimal, int]:
    run.refresh_from_db()
    return run.input_tokens, run.output_tokens, run.cost, run.unpriced_tokens


# -- Usage recorded and priced -------------------------------------------------------------------------------------

def test_a_model_call_records_its_usage_and_cost_with_its_result_per_visit_and_for_the_run(tmp_path):
    with counting("llm_tokens_total", workflow="test-model-calls", model=MODEL, kind="input") as input_tokens, \
            counting("llm_tokens_total", workflow="test-model-calls", model=MODEL, kind="output") as output_tokens, \
            counting("llm_cost_total", workflow="test-model-calls", model=MODEL) as cost:
        run = advance(start("test-model-calls", tmp_path / "calls", rounds=3))
    assert run.status == RunStatus.SUCCEEDED, run.error
    usage = {"model": MODEL, "input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS, "cost": CALL_COST}
    assert usages(run) == [("llm.chat", 0, usage), ("llm.chat", 1, usage), ("llm.chat", 2, usage)]
    assert totals(run) == (3 * INPUT_TOKENS, 3 * OUTPUT_TOKENS, 3 * Decimal(CALL_COST), 0)
    assert (input_tokens.by, output_tokens.by) == (3 * INPUT_TOKENS, 3 * OUTPUT_TOKENS)
    assert cost.by == pytest.approx(3 * float(CALL_COST))


def test_a_model_without_a_price_counts_its_tokens_and_says_its_cost_is_unknown(tmp_path):
    with counting("llm_unpriced_tokens_total", workflow="test-model-calls", model="unlisted-model") as unpriced, \
            counting("llm_cost_total", workflow="test-model-calls", model="unlisted-model") as cost:
        run = advance(start("test-model-calls", tmp_path / "calls", rounds=2, model="unlisted-model"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert [usage["cost"] for _, _, usage in usages(run)] == [None, None]  # unknown, not 0
    assert totals(run) == (2 * INPUT_TOKENS, 2 * OUTPUT_TOKENS, Decimal(0), 2 * CALL_TOKENS)
    assert (unpriced.by, cost.by) == (2 * CALL_TOKENS, 0)


def test_a_dated_snapshot_takes_its_model_s_price(tmp_path):
    run = advance(start("test-model-calls", tmp_path / "calls", rounds=1, model=f"{MODEL}-2024-07-18"))
    assert totals(run) == (INPUT_TOKENS, OUTPUT_TOKENS, Decimal(CALL_COST), 0)


def test_a_plain_activity_costs_nothing_more(tmp_path):
    """No usage declared: no usage in its entry, and no statement touches the run's spending."""
    run, _ = services.start_run(workflow="test-visit-loop", input={"calls_file": str(tmp_path / "calls"), "rounds": 2},
                                business_key="PLAIN-1")
    with CaptureQueriesContext(connection) as queries:
        run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert [usage for _, _, usage in usages(run)] == [None, None]
    assert not [q["sql"] for q in queries.captured_queries if SETS_SPENDING.search(q["sql"])]


# -- Replay does not count twice ----------------------------------------------------------------------------------

def test_a_visit_run_again_after_a_crash_reuses_the_answer_and_counts_it_once(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    run = start("test-model-calls", calls, rounds=2)
    crash_before_checkpoint(monkeypatch, 1)  # visit #2 recorded its model call, then the worker dies
    with counting("llm_tokens_total", workflow="test-model-calls", kind="input") as input_tokens:
        with pytest.raises(SimulatedCrash):
            advance(run)
        expire_lease(run)
        run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == ["think-1", "think-2"]  # the model was not asked again
    assert totals(run) == (2 * INPUT_TOKENS, 2 * OUTPUT_TOKENS, 2 * Decimal(CALL_COST), 0)
    assert input_tokens.by == 2 * INPUT_TOKENS


# -- The budget ----------------------------------------------------------------------------------------------------

def test_the_token_budget_stops_the_run_before_the_model_call_and_raising_it_resumes_the_run(tmp_path):
    calls = tmp_path / "calls"
    with counting("llm_budget_exhausted_total", workflow="test-token-budget") as stopped:
        run = advance(start("test-token-budget", calls, rounds=5))
    assert (run.budget_tokens, run.budget_cost) == (300, None)  # the workflow's, recorded when it started
    assert run.status == RunStatus.NEEDS_ATTENTION and stopped.by == 1
    assert calls_in(calls) == ["think-1", "think-2", "think-3"]  # the fourth call was never made
    assert run.error["kind"] == "budget_exhausted" and run.error["limit"] == "tokens"
    assert run.error["spent"]["tokens"] == 3 * CALL_TOKENS and run.error["budget"] == {"tokens": 300, "cost": None}
    assert "360 tokens of its budget of 300 tokens before model call 'llm.chat'" in run.error["message"]
    assert run.current_step == "think" and run.checkpoint_seq == 3  # still at the visit it stopped in
    assert advance(run).status == RunStatus.NEEDS_ATTENTION  # nothing moves it but an operator
    # Those who may raise a budget are told (operators), not those who resolve UNKNOWN operations.
    assert list(NotificationEvent.objects.filter(run=run).values_list("kind", flat=True)) == ["run_over_budget"]

    operator = user_with_roles("ops", "operator")
    run = services.raise_budget(run_id=run.id, tokens=1000, user=operator, source="console", reason="worth it")
    assert (run.status, run.budget_tokens, run.error) == (RunStatus.PENDING, 1000, None)
    audit = OperatorAction.objects.get(run=run, action="raise_budget")
    assert (audit.status_before, audit.status_after, audit.reason) == ("NEEDS_ATTENTION", "PENDING", "worth it")
    assert audit.detail["budget_before"]["tokens"] == 300 and audit.detail["budget_after"]["tokens"] == 1000
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == [f"think-{n}" for n in range(1, 6)]  # each call made once
    assert totals(run)[:2] == (5 * INPUT_TOKENS, 5 * OUTPUT_TOKENS)


def test_the_cost_budget_stops_the_run_before_the_call_that_would_spend_past_it(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-cost-budget", calls, rounds=4))
    assert run.status == RunStatus.NEEDS_ATTENTION
    assert calls_in(calls) == ["think-1", "think-2"]
    assert run.error["limit"] == "cost" and run.error["spent"]["cost"] == "0.000054"
    run = services.raise_budget(run_id=run.id, cost=Decimal("0.01"), user=None, source="command")
    assert advance(run).status == RunStatus.SUCCEEDED


def test_a_step_that_catches_every_exception_cannot_swallow_the_budget_s_stop(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-careless-budget", calls, rounds=3))
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error["kind"] == "budget_exhausted"
    assert calls_in(calls) == ["think-1"]


def test_a_run_stopped_by_its_budget_is_never_failed_and_may_be_cancelled(tmp_path):
    run = advance(start("test-token-budget", tmp_path / "calls", rounds=5))
    cancellation = services.cancel_run(run_id=run.id, user=None, source="command", reason="too expensive")
    assert cancellation.run.status == RunStatus.CANCELLED


# -- Model calls made at once --------------------------------------------------------------------------------------

def test_model_calls_made_at_once_each_record_their_usage_and_a_plain_call_beside_them_none(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-model-group", calls))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(calls_in(calls)) == ["a", "b", "read"]
    recorded = {name: usage for name, _, usage in usages(run)}
    assert recorded["read"] is None and recorded["llm.a"]["cost"] == recorded["llm.b"]["cost"] == CALL_COST
    assert totals(run) == (2 * INPUT_TOKENS, 2 * OUTPUT_TOKENS, 2 * Decimal(CALL_COST), 0)


def test_a_group_of_calls_over_the_budget_sends_none_of_them(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-model-group-budget", calls))
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error["kind"] == "budget_exhausted"
    assert calls_in(calls) == ["warm-up"]  # neither model call of the group, nor the read beside them
    assert run.error["call"] == "llm.a #0, llm.b #2"
    run = services.raise_budget(run_id=run.id, tokens=10_000, user=None, source="command")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(calls_in(calls)) == ["a", "b", "read", "warm-up"]


# -- A usage function that cannot read its answer ------------------------------------------------------------------

def test_a_usage_function_that_fails_fails_the_run_naming_the_call(tmp_path, monkeypatch):
    from tests.durable import cost_workflows

    def broken(answer):
        raise KeyError("usage")

    monkeypatch.setattr(cost_workflows, "usage_of", broken)
    run = advance(start("test-model-calls", tmp_path / "calls", rounds=1))
    assert run.status == RunStatus.FAILED
    assert run.error["kind"] == "usage_unreadable" and "'llm.chat'" in run.error["message"]
