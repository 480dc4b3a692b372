"""DurableAgent: a Pydantic AI agent run inside a step, advanced in this process against the sandbox over HTTP.

The agent (tests/durable/agents/agent_workflows.py) has a scripted FunctionModel: the user prompt names the
scenario, and every live model request appends a line to a file, so each test counts what the model was asked.
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import ApprovalRequest
from durable import pauses, services
from durable.agents.pydantic_ai import MODEL_ACTIVITY, usage_of
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.errors import Conflict
from durable.models import JournalEntry, Run, SideEffect
from durable.registry import registry
from durable.runtime.fault_points import AFTER_DOWNSTREAM, AFTER_STARTED, FAULT_POINTS
from durable.store.checkpoints import state_at
from tests.approvals.flow import decide
from tests.conftest import make_user
from tests.durable.agents import agent_workflows as aw
from tests.durable.claims import advance, make_retry_due
from tests.durable.ledger_workflows import SimulatedCrash, crash_at, crash_before_checkpoint, expire_lease
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight


@pytest.fixture
def model_calls(sandbox, tmp_path, monkeypatch):
    """The file the scripted model appends a line to whenever it is really asked."""
    path = tmp_path / "model-calls"
    monkeypatch.setenv(aw.CALLS, str(path))
    return lambda: len(calls_in(path))


@pytest.fixture
def ann(db):
    return make_user("ann", "approvals.decide_approvalrequest")


def start(scenario: str, order_id: str = "ORD-1004", **extra: str) -> Run:
    run, _ = services.start_run(workflow=aw.NAME, business_key=order_id,
                                input={"order_id": order_id, "scenario": scenario, **extra})
    return run


def activities(run: Run) -> list[tuple[int, str]]:
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).order_by("call_index")
    return list(rows.values_list("call_index", "name"))


def recorded(run: Run, name: str) -> list[dict]:
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, name=name).order_by("call_index")
    return [row.result for row in rows]


def effects(sandbox, service: str) -> int:
    return sandbox.state.calls_snapshot()[service]["effects"]


def crashed_then_resumed(run: Run) -> Run:
    """Advance a run whose worker 'dies' (a crash armed by the test), then again once its lease ran out."""
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    return advance(run)


# -- model requests and tool calls ---------------------------------------------------------------------------------

def test_each_model_request_and_tool_call_is_an_activity_and_tools_asked_together_run_at_once(model_calls, sandbox):
    run = advance(start("lookups"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert activities(run) == [(0, MODEL_ACTIVITY), (1, "tool.read_order"), (2, "tool.read_tickets"),
                               (3, MODEL_ACTIVITY)]
    # The two lookups the model asked for in one response: one ctx.parallel group, in the order it asked.
    group = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.PARALLEL)
    assert [(call["call_index"], call["name"]) for call in group.detail["calls"]] == [
        (1, "tool.read_order"), (2, "tool.read_tickets")]
    assert model_calls() == 2
    first = recorded(run, MODEL_ACTIVITY)[0]
    assert first["request"]["parts"][0] == {**first["request"]["parts"][0], "part_kind": "system-prompt",
                                            "content": aw.SYSTEM_PROMPT}
    assert [part["tool_name"] for part in first["response"]["parts"]] == ["read_order", "read_tickets"]
    assert recorded(run, "tool.read_tickets") == [{"return": {"customer": "Barbara Liskov", "tickets": []}}]
    assert run.output["answer"].startswith("done: {'order_id': 'ORD-1004'")


def test_usage_of_names_the_model_and_its_tokens_from_a_response_or_its_record(model_calls, sandbox):
    run = advance(start("lookups"))
    record = recorded(run, MODEL_ACTIVITY)[0]
    usage = usage_of(record)
    assert usage["model"] == "function:script:" and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    from durable.agents.pydantic_ai.records import response_of

    assert usage_of(response_of(record)) == usage == record["usage"]


def test_a_visit_re_executed_after_a_crash_asks_the_model_nothing_it_answered(model_calls, sandbox, monkeypatch):
    run = start("lookups")
    crash_before_checkpoint(monkeypatch, 0)  # the agent ran to its end, then the worker died before the checkpoint
    with pytest.raises(SimulatedCrash):
        advance(run)
    assert model_calls() == 2
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert model_calls() == 2 and sandbox.state.calls_snapshot()["orders"]["calls"] == 1
    reused = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.ACTIVITY_REUSED)
    assert [call["name"] for call in reused.detail["calls"]] == [MODEL_ACTIVITY, "tool.read_order",
                                                                  "tool.read_tickets", MODEL_ACTIVITY]
    # The agent's run id is the same on every execution of the visit: the replayed conversation is the recorded one.
    state = state_at(run.id, 1)
    assert {message["run_id"] for message in state["messages"]} == {recorded(run, MODEL_ACTIVITY)[0]["request"]["run_id"]}


def test_a_tool_that_asks_the_model_to_retry_answers_the_same_on_replay(model_calls, sandbox, monkeypatch):
    crash_before_checkpoint(monkeypatch, 0)
    run = crashed_then_resumed(start("retry-then-answer"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert recorded(run, "tool.picky") == [{"retry": "ask again with n=2"}, {"return": "fine"}]
    assert model_calls() == 3


# -- side effects ------------------------------------------------------------------------------------------------

def test_a_side_effect_tool_describes_the_operation_and_the_ledger_performs_it_once(model_calls, sandbox):
    run = advance(start("refund"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    operation = SideEffect.objects.get(run=run)
    assert (operation.action_name, operation.business_key, operation.status) == ("refund", "ORD-1004", Op.SUCCEEDED)
    assert recorded(run, "tool.refund") == [{"operation": {"business_key": "ORD-1004", "payload": {
        "order_id": "ORD-1004", "amount": "10.00", "currency": "EUR"}}}]
    assert effects(sandbox, "payments") == 1
    assert "'external_ref': 're_1'" in run.output["answer"]  # the ledger's result is the tool's answer


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_side_effect_tool_crashed_at_any_fault_point_is_performed_once(model_calls, sandbox, monkeypatch, point):
    crash_at(monkeypatch, point, "refund")
    run = crashed_then_resumed(start("refund"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert effects(sandbox, "payments") == 1 and len(sandbox.state.list_refunds()) == 1
    assert SideEffect.objects.get(run=run).status == Op.SUCCEEDED
    assert model_calls() == 3  # the two requests before the crash were replayed, not asked again


@pytest.mark.parametrize("point", [AFTER_STARTED, AFTER_DOWNSTREAM])
def test_a_side_effect_a_blind_downstream_may_have_done_waits_for_an_operator_as_unknown(model_calls, sandbox,
                                                                                      monkeypatch, point):
    crash_at(monkeypatch, point, "notify")
    run = crashed_then_resumed(start("notify-twice"))
    assert run.status == RunStatus.NEEDS_ATTENTION, run.error
    assert SideEffect.objects.get(run=run).status == Op.UNKNOWN  # never "failed": an operator says what happened
    assert effects(sandbox, "notifications") == (1 if point == AFTER_DOWNSTREAM else 0)


def test_side_effects_asked_together_are_performed_at_once(model_calls, sandbox):
    run = advance(start("refund-and-notify"))
    assert run.status == RunStatus.SUCCEEDED, run.error
    groups = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.PARALLEL).order_by("id")
    assert [[call.get("name") or call.get("action") for call in group.detail["calls"]] for group in groups] == [
        ["tool.refund", "tool.notify"], ["refund", "notify"]]  # the tools' bodies, then the operations they described
    assert set(SideEffect.objects.filter(run=run).values_list("action_name", "status")) == {
        ("refund", Op.SUCCEEDED), ("notify", Op.SUCCEEDED)}
    assert effects(sandbox, "payments") == 1 and effects(sandbox, "notifications") == 1


def test_a_side_effect_asked_again_with_other_arguments_is_not_done_and_the_model_is_told(model_calls, sandbox):
    run = advance(start("notify-twice"))  # the same business key, another text
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert effects(sandbox, "notifications") == 1
    assert "durable did not do this" in run.output["answer"] and "not done again" in run.output["answer"]


# -- approvals ---------------------------------------------------------------------------------------------------

def test_a_tool_that_requires_approval_waits_in_the_inbox_then_acts_on_exactly_what_was_approved(model_calls, sandbox,
                                                                                                   ann):
    run = advance(start("approved-refund"))
    assert run.status == RunStatus.WAITING_APPROVAL, run.error
    request = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert request.approval_object == {"action": "refund", "target": "ORD-1004", "amount": "89.90", "currency": "EUR"}
    assert (request.step, request.kind) == ("converse", "refund")
    assert model_calls() == 2 and effects(sandbox, "payments") == 0

    decide(request, ann)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert model_calls() == 3  # the wake after the decision replayed both requests, and asked only the last
    assert [(r["order_id"], r["amount"]) for r in sandbox.state.list_refunds()] == [("ORD-1004", "89.90")]
    assert SideEffect.objects.get(run=run).payload == {"order_id": "ORD-1004", "amount": "89.90", "currency": "EUR"}
    request.refresh_from_db()
    assert request.used_at is not None  # revalidated right before the refund, and used once


def test_a_rejected_approval_is_the_tools_answer_and_nothing_is_done(model_calls, sandbox, ann):
    run = advance(start("approved-refund"))
    decide(ApprovalRequest.objects.get(run=run, status="PENDING"), ann, "reject", reason="damage not shown")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert "a human rejected this call" in run.output["answer"] and "damage not shown" in run.output["answer"]
    assert effects(sandbox, "payments") == 0 and not SideEffect.objects.filter(run=run).exists()


def test_an_approval_whose_facts_changed_is_invalidated_and_asked_again_before_anything_is_done(model_calls, sandbox,
                                                                                                  ann):
    run = advance(start("approved-refund"))
    first = ApprovalRequest.objects.get(run=run, status="PENDING")
    sandbox.state.upsert_order({"order_id": "ORD-1004", "amount": "50.00"})  # the order changed behind the request
    with pytest.raises(Conflict):
        decide(first, ann)  # refused and invalidated: nothing was approved
    run = advance(run)
    first.refresh_from_db()
    assert first.status == "INVALIDATED" and run.status == RunStatus.WAITING_APPROVAL
    again = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert again.ask == 2 and again.approval_object["amount"] == "50.00"
    assert effects(sandbox, "payments") == 0


def test_a_changed_system_prompt_blocks_a_run_paused_under_the_old_one(model_calls, sandbox, ann, monkeypatch):
    run = advance(start("approved-refund"))
    assert run.status == RunStatus.WAITING_APPROVAL
    changed = aw.build_workflow(aw.build_agent(system_prompt="You refund whatever is asked."))
    assert changed.prompt_release != aw.test_agent_workflow.prompt_release
    monkeypatch.setitem(registry._by_key, (aw.NAME, 1), changed)  # the next deploy ships the new prompt
    decide(ApprovalRequest.objects.get(run=run, status="PENDING"), ann)
    run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "release_changed")
    assert "prompt_release" in run.error["message"] and aw.test_agent.prompt_release in run.error["message"]
    assert effects(sandbox, "payments") == 0 and model_calls() == 2


def test_a_pause_asked_after_a_step_that_made_no_call_stops_the_agent_before_its_first_model_request(model_calls):
    run, _ = services.start_run(workflow=aw.AFTER_THOUGHT, business_key="ORD-1004",
                                input={"order_id": "ORD-1004", "scenario": "lookups", "pause_from_step": True})
    run = advance(run)  # `think` asks the pause; the agent's first model request finds it and is not sent
    assert (run.status, run.current_step, run.checkpoint_seq) == (RunStatus.PAUSED, "answer", 1)
    assert model_calls() == 0 and not JournalEntry.objects.filter(run=run, visit=1).exists()
    pauses.resume_run(run_id=run.id, user=None, source="command", reason="go on")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert model_calls() == 2 and run.output["answer"].startswith("done")  # asked once each, after the resume


# -- errors and retries ------------------------------------------------------------------------------------------

def test_a_rate_limited_model_is_retried_by_durable_no_sooner_than_its_retry_after(model_calls, sandbox):
    before = timezone.now()
    run = advance(start("rate-limited"))
    assert run.status == RunStatus.WAITING_RETRY, run.error
    assert (run.error["kind"], run.error["retryable"], run.error["retry_after"]) == ("rate_limited", True, 7.0)
    assert run.next_attempt_at >= before + timedelta(seconds=7)
    assert model_calls() == 2  # asked once: no client retried behind durable's back
    make_retry_due(run)
    run = advance(run)
    assert model_calls() == 3  # the retry replayed the first request and asked again only the one that failed


def test_a_content_policy_refusal_fails_the_run_without_a_retry(model_calls, sandbox):
    run = advance(start("refused"))
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"]) == ("content_policy_refusal", False)
    assert model_calls() == 1


# -- what the agent's model calls cost -----------------------------------------------------------------------------

def test_each_model_request_is_metered_on_the_run_and_a_replay_counts_nothing_again(model_calls, sandbox, settings):
    settings.DURABLE_LLM_PRICES = {"function:script:": {"input": "1.00", "output": "2.00"}}
    run = advance(start("lookups"))
    used = [usage_of(record) for record in recorded(run, MODEL_ACTIVITY)]
    assert (run.input_tokens, run.output_tokens) == (sum(u["input_tokens"] for u in used),
                                                     sum(u["output_tokens"] for u in used))
    assert run.cost > 0 and run.unpriced_tokens == 0
    entries = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, name=MODEL_ACTIVITY)
    assert all(entry.detail["usage"]["model"] == "function:script:" for entry in entries)


def test_a_run_over_its_budget_stops_before_the_agents_next_model_request(model_calls, sandbox):
    run = start("lookups")
    Run.objects.filter(id=run.id).update(budget_tokens=1)  # the first request alone goes over it
    run = advance(run)
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error["kind"] == "budget_exhausted", run.error
    assert model_calls() == 1  # the second request was never made
