"""A Pydantic AI agent with a scripted model, and the workflow that runs it: registered in the test process and in
worker processes (tests/conftest.py's TEST_WORKFLOW_MODULES).

The model is a FunctionModel: it reads the scenario from the user prompt ("scenario: refund") and answers turn n of
that scenario's script. Every live request appends a line to the file DURABLE_TEST_AGENT_CALLS names, so a test
counts what the model was really asked, across processes.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from durable import OnActiveBusinessKey, RetryPolicy, Workflow, register
from durable.agents.pydantic_ai import Approval, DurableAgent, Operation, SideEffectTool, approved
from durable.tools.demo import downstreams
from durable.tools.demo.refund_checks import refund_approvers, refund_facts, refund_to_approve, revalidate_refund

CALLS = "DURABLE_TEST_AGENT_CALLS"
NAME = "test-agent"
SYSTEM_PROMPT = "You help with one order. Use the tools."


@dataclass
class Deps:
    order_id: str
    hold_file: str = ""


RATE_LIMITED = "!429"  # a turn the provider answers with 429 and Retry-After: 7
REFUSED = "!content_filter"  # a turn the provider's content filter answers with nothing
# Each scenario's turns: the tool calls of a turn ((tool, args), ...) asked together, or the final answer (text).
SCRIPTS: dict[str, list[Any]] = {
    "lookups": [(("read_order", {"order_id": "ORD-1004"}), ("read_tickets", {"order_id": "ORD-1004"})), "done"],
    "refund": [(("read_order", {"order_id": "ORD-1004"}),), (("refund", {"reason": "damaged"}),), "refunded"],
    "refund-and-notify": [(("refund", {"reason": "damaged"}), ("notify", {"text": "We refunded you."})), "done"],
    "notify-twice": [(("notify", {"text": "Hello"}),), (("notify", {"text": "Hello!"}),), "done"],
    "approved-refund": [(("read_order", {"order_id": "ORD-1004"}),),
                        (("approved_refund", {"order_id": "ORD-1004", "reason": "damaged"}),), "answered"],
    "hold": [(("read_order", {"order_id": "ORD-1004"}),), (("hold", {}),), (("read_tickets", {"order_id": "ORD-1004"}),),
             "done"],
    "retry-then-answer": [(("picky", {"n": 1}),), (("picky", {"n": 2}),), "done"],
    "rate-limited": [(("read_order", {"order_id": "ORD-1004"}),), RATE_LIMITED],
    "refused": [REFUSED],
}


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The next answer of the scenario the user prompt names; the tools' answers are echoed in the final text."""
    if os.environ.get(CALLS):
        with open(os.environ[CALLS], "a") as calls:
            calls.write("model\n")
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    turns = SCRIPTS[prompt.removeprefix("scenario: ")]
    turn = turns[min(sum(isinstance(m, ModelResponse) for m in messages), len(turns) - 1)]
    if turn == RATE_LIMITED:
        raise ModelHTTPError(429, "script", body={"error": "slow down"}, headers={"Retry-After": "7"})
    if turn == REFUSED:
        return ModelResponse(parts=[], finish_reason="content_filter")
    if isinstance(turn, str):
        last = messages[-1].parts if messages else []
        said = [str(getattr(part, "content", "")) for part in last]
        return ModelResponse(parts=[TextPart(f"{turn}: {' | '.join(said)}")])
    number = len(messages)
    return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"call-{number}-{i}")
                                for i, (tool, args) in enumerate(turn)])


def build_agent(system_prompt: str = SYSTEM_PROMPT) -> DurableAgent[Deps, str]:
    agent: Agent[Deps, str] = Agent(FunctionModel(script), system_prompt=system_prompt, deps_type=Deps, name=NAME)

    @agent.tool
    def read_order(ctx: RunContext[Deps], order_id: str) -> dict[str, Any]:
        return downstreams.get_order(order_id)

    @agent.tool
    def read_tickets(ctx: RunContext[Deps], order_id: str) -> dict[str, Any]:
        return downstreams.customer_tickets(order_id)

    @agent.tool
    def hold(ctx: RunContext[Deps]) -> str:
        deadline = time.monotonic() + 60
        while ctx.deps.hold_file and Path(ctx.deps.hold_file).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return "held"

    @agent.tool_plain
    def picky(n: int) -> str:
        from pydantic_ai import ModelRetry

        if n < 2:
            raise ModelRetry("ask again with n=2")
        return "fine"

    @agent.tool
    def refund(ctx: RunContext[Deps], reason: str) -> Operation:
        order = ctx.deps.order_id  # the run's own order, never one the model named
        return Operation(business_key=order, payload={"order_id": order, "amount": "10.00", "currency": "EUR"})

    @agent.tool
    def notify(ctx: RunContext[Deps], text: str) -> Operation:
        return Operation(business_key=f"{ctx.deps.order_id}:notify",
                         payload={"to": "customer", "message": text})

    @agent.tool(requires_approval=True)
    def approved_refund(ctx: RunContext[Deps], order_id: str, reason: str) -> Operation:
        refund = approved(ctx)  # exactly what the human approved: nothing of it from the model
        return Operation(business_key=ctx.deps.order_id, payload={
            "order_id": refund["target"], "amount": refund["amount"], "currency": refund["currency"]})

    return DurableAgent(
        agent,
        side_effects={"refund": SideEffectTool("refund", downstreams.payments),
                      "notify": SideEffectTool("notify", downstreams.notifications),
                      "approved_refund": SideEffectTool("refund", downstreams.payments)},
        approvals={"approved_refund": Approval("refund", snapshot=lambda args: refund_facts(args["order_id"]),
                                               approve=refund_to_approve, revalidate=revalidate_refund,
                                               expires_in=timedelta(days=1), approvers=refund_approvers)},
    )


class AgentInput(BaseModel):
    order_id: str
    scenario: str
    hold_file: str = ""


class AgentState(AgentInput):
    answer: str | None = None
    messages: list[dict[str, Any]] = []


def build_workflow(durable_agent: DurableAgent[Deps, str]) -> Workflow:
    """The workflow that runs the agent in one step, pinned to its prompt and tools."""
    workflow = Workflow(
        name=NAME, version=1, state=AgentState, input=AgentInput, prompt_release=durable_agent.prompt_release,
        tool_catalog_version=durable_agent.tool_catalog_version, model_policy_version="test",
        pinned=("prompt_release", "tool_catalog_version"),
        retry=RetryPolicy(max_attempts=3, initial_interval=0.05, max_interval=30, jitter=0.1),  # Retry-After up to 30 s
        on_active_business_key=OnActiveBusinessKey.START_ANOTHER)

    @workflow.step(side_effects=["refund", "notify"])
    def converse(ctx: Any, state: AgentState) -> AgentState:
        result = durable_agent.run(ctx, f"scenario: {state.scenario}",
                                   deps=Deps(state.order_id, state.hold_file))
        state.answer = result.output
        state.messages = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
        return state

    @workflow.step
    def wrap_up(ctx: Any, state: AgentState) -> AgentState:
        return state

    return workflow


test_agent = build_agent()
test_agent_workflow = register(build_workflow(test_agent))


class ThoughtInput(AgentInput):
    pause_from_step: bool = False  # `think` asks its own run's pause, as an operator would while it runs


class ThoughtState(ThoughtInput):
    answer: str | None = None


AFTER_THOUGHT = "test-agent-after-thought"
after_thought = register(Workflow(
    name=AFTER_THOUGHT, version=1, state=ThoughtState, input=ThoughtInput, prompt_release=test_agent.prompt_release,
    tool_catalog_version=test_agent.tool_catalog_version, model_policy_version="test",
    pinned=("prompt_release", "tool_catalog_version"), on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@after_thought.step
def think(ctx: Any, state: ThoughtState) -> ThoughtState:
    """A step that makes no call: the boundary after it does not look whether a pause was asked."""
    from durable import pauses

    if state.pause_from_step:
        pauses.pause_run(run_id=ctx.run_id, user=None, source="command", reason="asked while it thought")
    return state


@after_thought.step
def answer(ctx: Any, state: ThoughtState) -> ThoughtState:
    """The agent's first model request is the step's first call."""
    state.answer = test_agent.run(ctx, f"scenario: {state.scenario}", deps=Deps(state.order_id)).output
    return state
