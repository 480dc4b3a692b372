"""A handoff between OpenAI Agents SDK agents inside one durable step: recorded, so its callback runs once and a
replay hands to the same agent; each agent's model requests metered, priced, budgeted and under a named limit."""
import pytest
from agents import Agent

from durable import services
from durable.agents.openai_agents import MODEL_ACTIVITY, DurableAgent
from durable.engine.states import RunStatus
from durable.models import JournalEntry, LimitUse, Run
from tests.durable.agents import openai_agent_workflows as flows
from tests.durable.claims import advance
from tests.durable.ledger_workflows import SimulatedCrash, expire_lease
from tests.durable.tools.demo.test_support_agent_pydantic_ai import crash_before_the_end

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def counted(settings):
    settings.DURABLE_LIMITS = {flows.LIMIT: {"tokens": "1000/m"}}
    flows.HANDED_OFF.clear()
    flows.ASKED.clear()


def test_a_handoff_is_a_recorded_activity_between_the_two_agents_model_requests():
    run, _ = services.start_run(workflow=flows.NAME, business_key="T-1", input={"message": "I want my money back"})
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).order_by("call_index")
    assert list(rows.values_list("name", flat=True)) == [MODEL_ACTIVITY, "handoff.refunds", MODEL_ACTIVITY]
    assert run.output == {"message": "I want my money back", "answer": "Refunds will handle it.",
                          "last_agent": "refunds"}
    assert flows.ASKED == ["triage", "refunds"] and flows.HANDED_OFF == ["refunds"]


def test_a_visit_re_executed_after_a_crash_hands_off_again_without_running_the_callback_or_asking_the_model(
        monkeypatch):
    run, _ = services.start_run(workflow=flows.NAME, business_key="T-2", input={"message": "refund please"})
    crash_before_the_end(monkeypatch)
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["last_agent"] == "refunds"
    assert flows.ASKED == ["triage", "refunds"] and flows.HANDED_OFF == ["refunds"]


def test_each_agents_model_requests_are_priced_and_take_room_in_the_named_limit(settings):
    settings.DURABLE_LLM_PRICES = {"scripted": {"input": "1.00", "output": "2.00"}}
    run, _ = services.start_run(workflow=flows.NAME, business_key="T-3", input={"message": "refund please"})
    run = advance(run)
    assert (run.input_tokens, run.output_tokens, run.unpriced_tokens) == (20, 10, 0) and run.cost > 0
    assert sorted(LimitUse.objects.filter(limit=flows.LIMIT).values_list("tokens", flat=True)) == [15, 15]


def test_a_run_over_its_budget_stops_before_the_next_agents_model_request():
    run, _ = services.start_run(workflow=flows.NAME, business_key="T-4", input={"message": "refund please"})
    Run.objects.filter(id=run.id).update(budget_tokens=1)  # the triage agent's request alone goes over it
    run = advance(run)
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error["kind"] == "budget_exhausted", run.error
    assert flows.ASKED == ["triage"]  # the refunds agent's request was never made


def test_two_agents_of_one_name_are_refused_when_the_agent_is_wrapped():
    twin = Agent(name="refunds", instructions="refunds: another one.", model=flows.Scripted())
    with pytest.raises(ValueError, match="'refunds'"):
        DurableAgent(flows.triage.clone(handoffs=[flows.refunds, twin]))
