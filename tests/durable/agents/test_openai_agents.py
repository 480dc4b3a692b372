"""The support agent's OpenAI Agents SDK twin, advanced in this process against the sandbox: DurableAgent's
records, parallel tools, side effects through the ledger, approvals, replay after a crash, metering and handoffs.

The same scenarios as support-agent's (tests/durable/tools/demo/test_support_agent.py), with the same scripted
model: the loop is the SDK's Runner, run by DurableAgent in one step.
"""
import json

import pytest

from approvals.models import ApprovalRequest
from durable import services
from durable.agents.openai_agents import MODEL_ACTIVITY, DurableAgent, usage_of
from durable.console.timeline import run_timeline
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.store.checkpoints import state_at
from durable.tools.demo import support_agent_openai_agents as twin
from durable.tools.demo.support_model import assistant, tool_call
from tests.approvals.flow import decide
from tests.durable.claims import advance, make_retry_due
from tests.durable.ledger_workflows import SimulatedCrash, expire_lease
from tests.durable.tools.demo.test_support_agent import (  # noqa: F401  (ann, model_calls: fixtures)
    INJECTION,
    QUESTION,
    REFUND,
    Script,
    ann,
    effects,
    model_calls,
)
from tests.durable.tools.demo.test_support_agent_pydantic_ai import crash_before_the_end

pytestmark = pytest.mark.django_db(transaction=True)


def start(message: str, order_id: str = "ORD-1004") -> Run:
    run, _ = services.start_run(workflow=twin.NAME, business_key=order_id,
                                input={"order_id": order_id, "customer_message": message})
    return run


def activities(run: Run) -> list[tuple[int, str]]:
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).order_by("call_index")
    return list(rows.values_list("call_index", "name"))


def test_the_twin_is_pinned_to_its_agents_instructions_and_tools():
    workflow = twin.support_agent_openai_agents
    assert (workflow.prompt_release, workflow.tool_catalog_version) == (twin.support.prompt_release,
                                                                       twin.support.tool_catalog_version)
    assert workflow.prompt_release.startswith("support-prompt-") and "tool_catalog_version" in workflow.pinned
    changed = DurableAgent(twin.agent.clone(instructions="Be brief."), side_effects=twin.support.side_effects,
                           approvals=twin.support.approvals)
    assert changed.prompt_release != twin.support.prompt_release
    assert changed.tool_catalog_version == twin.support.tool_catalog_version


def test_a_tool_that_needs_approval_without_an_approval_is_refused_when_the_agent_is_wrapped():
    with pytest.raises(ValueError, match="propose_refund"):
        DurableAgent(twin.agent, side_effects=twin.support.side_effects)


def test_a_question_looks_up_the_order_and_the_tickets_at_once_then_answers(model_calls, sandbox):
    run = advance(start(QUESTION))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert activities(run) == [(0, MODEL_ACTIVITY), (1, "tool.lookup_order"), (2, "tool.past_tickets"),
                               (3, MODEL_ACTIVITY)]
    group = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.PARALLEL)
    assert [call["name"] for call in group.detail["calls"]] == ["tool.lookup_order", "tool.past_tickets"]
    assert run.output["answer"] == ("Your order ORD-1004 (89.90 EUR) is shipped. "
                                    "You have 0 earlier support ticket(s) with us.")
    assert run.output["tools_called"] == ["lookup_order", "past_tickets"]
    assert len(model_calls) == 2 and not SideEffect.objects.filter(run=run).exists()


def test_each_model_request_is_recorded_with_its_usage_and_metered_on_the_run(model_calls, sandbox):
    run = advance(start(QUESTION))
    records = [entry.result for entry in JournalEntry.objects.filter(run=run, name=MODEL_ACTIVITY)]
    assert [usage_of(record)["model"] for record in records] == ["scripted-support"] * 2
    assert run.input_tokens == sum(usage_of(r)["input_tokens"] for r in records) > 0
    assert run.output_tokens == sum(usage_of(r)["output_tokens"] for r in records) > 0


def test_a_refund_waits_for_approval_inside_the_agent_run_then_refunds_and_emails_once(model_calls, sandbox, ann):
    run = advance(start(REFUND))
    assert run.status == RunStatus.WAITING_APPROVAL, run.error
    request = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert (request.step, request.visit, request.position) == ("converse", 0, 1)
    assert request.approval_object == {"action": "refund", "target": "ORD-1004", "amount": "89.90",
                                       "currency": "EUR"}
    assert len(model_calls) == 2 and effects(sandbox, "payments") == 0
    assert [entry.summary.split(";")[0] for entry in run_timeline(run)][1:] == [
        "activity llm.request #0 recorded", "parallel: tool.lookup_order #1, tool.past_tickets #2 started together",
        "activity llm.request #3 recorded", "approval asked"]

    decide(request, ann)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert len(model_calls) == 4  # the wake replayed the two requests it had, then asked two more
    assert [(r["order_id"], r["amount"]) for r in sandbox.state.list_refunds()] == [("ORD-1004", "89.90")]
    assert effects(sandbox, "payments") == 1 and effects(sandbox, "notifications") == 1
    assert set(run.side_effects.values_list("action_name", "status")) == {("refund", "SUCCEEDED"),
                                                                         ("email", "SUCCEEDED")}
    [email] = sandbox.state.snapshot()["notifications"]
    assert email["to"] == "Barbara Liskov" and "We refunded 89.90 EUR" in email["message"]
    assert run.output["refund_id"] == "re_1" and run.output["email_ids"] == [email["notification_id"]]
    assert run.output["tools_called"] == ["lookup_order", "past_tickets", "propose_refund", "send_email"]
    assert run.output["answer"].startswith("I refunded 89.90 EUR for order ORD-1004")


def test_a_rejected_refund_is_the_tools_answer_and_the_model_tells_the_customer(model_calls, sandbox, ann):
    run = advance(start(REFUND))
    decide(ApprovalRequest.objects.get(run=run, status="PENDING"), ann, "reject", reason="damage not shown")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["answer"].startswith("I could not refund order ORD-1004: a human rejected this call")
    assert effects(sandbox, "payments") == 0 and effects(sandbox, "notifications") == 0


def test_a_prompt_injection_naming_another_order_is_refused_before_anyone_is_asked(model_calls, sandbox):
    run = advance(start(INJECTION))
    assert run.status == RunStatus.SUCCEEDED, run.error
    [refusal] = run.output["refused"]
    assert "'ORD-1002'" in refusal and "'ORD-1004'" in refusal and refusal.startswith("the model proposed order")
    assert run.output["answer"].startswith("I could not refund order ORD-1004")
    assert not ApprovalRequest.objects.filter(run=run).exists()  # nobody was asked to refund ORD-1002
    assert sandbox.state.list_refunds() == []


def test_a_visit_re_executed_after_a_crash_does_not_ask_the_model_again(model_calls, sandbox, monkeypatch):
    run = start(QUESTION)
    crash_before_the_end(monkeypatch)
    with pytest.raises(SimulatedCrash):
        advance(run)
    assert len(model_calls) == 2
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert len(model_calls) == 2 and sandbox.state.calls_snapshot()["orders"]["calls"] == 1


def test_a_model_that_never_stops_asking_for_tools_is_stopped_by_the_agents_turn_limit(sandbox, monkeypatch):
    monkeypatch.setattr(twin, "support_model", lambda: Script(
        assistant(calls=[tool_call("lookup_order", {"order_id": "ORD-1004"}, 1)])))
    run = advance(start(QUESTION))
    assert (run.status, run.error["kind"], run.error["retryable"]) == (RunStatus.FAILED, "usage_limit_exceeded", False)
    assert JournalEntry.objects.filter(run=run, name=MODEL_ACTIVITY).count() == twin.MAX_TURNS


def test_an_email_asked_again_with_another_text_is_not_sent_and_the_model_is_told(sandbox, monkeypatch):
    email, other_text = {"subject": "Your order", "body": "On its way."}, {"subject": "Your order", "body": "Soon!"}
    monkeypatch.setattr(twin, "support_model", lambda: Script(
        assistant(calls=[tool_call("send_email", email, 1)]),
        assistant(calls=[tool_call("send_email", email, 2), {**tool_call("send_email", other_text, 2), "id": "again"}]),
        assistant("All done.")))
    run = advance(start(QUESTION))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert effects(sandbox, "notifications") == 1 and run.output["email_ids"] == ["ntf-1"]
    outputs = [item["output"] for item in state_at(run.id, 1)["items"]
               if item.get("type") == "function_call_output"]
    assert json.loads(outputs[0]) == json.loads(outputs[1]) and "not done again" in outputs[2]


def test_an_unavailable_model_is_retried_by_durable_not_by_the_sdk(sandbox, settings):
    settings.DURABLE_LLM_BASE_URL = sandbox.url + "/v1"
    settings.DURABLE_LLM_MODEL = "sandbox-model"
    sandbox.state.arm_fault("llm", "503")
    run = advance(start(QUESTION))
    assert run.status == RunStatus.WAITING_RETRY, run.error
    assert run.error["step"] == "converse"
    assert sandbox.state.calls_snapshot()["llm"]["calls"] == 1
    make_retry_due(run)
    assert advance(run).status == RunStatus.SUCCEEDED
