"""support-agent-pydantic-ai: the support agent written as a Pydantic AI agent, run durably by DurableAgent.

The same conversation as `support-agent` (durable/tools/demo/support_agent.py), the same tools and the same model,
but the loop is Pydantic AI's: one step, `converse`, runs the agent; durable records each of its model requests
and tool calls, performs its refund and its email through the ledger, and asks a human before the refund.

- `lookup_order` and `past_tickets`, asked for together, run at once (one `ctx.parallel` group);
- `propose_refund` requires approval (`requires_approval=True`): durable asks in the inbox, revalidates, and the
  tool refunds exactly what was approved (`approved(ctx)`), through the ledger;
- `send_email` emails the customer who placed the order: the tool reads who that is, and says what to send.

The model never chooses what is acted on (invariant 13): an order it names that is not the run's is refused before
the tool runs (the tools' `args_validator`), and the model is told; the run's output lists the refusals.

Its model is the demo's (durable/tools/demo/llm.py): the scripted support model, or the OpenAI-compatible endpoint
when DURABLE_LLM_BASE_URL is set, reached through a `FunctionModel` that speaks the chat-completions format.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from pydantic import Field
from pydantic_ai import Agent, RunContext, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import UsageLimits

from durable import Context, RetryPolicy, UntrustedOutputRefused, Workflow, bound_to_run, register
from durable.agents.pydantic_ai import Approval, DurableAgent, Operation, SideEffectTool, approved
from durable.tools.demo import downstreams
from durable.tools.demo.llm import support_model
from durable.tools.demo.refund_checks import refund_approvers, refund_facts, refund_to_approve, revalidate_refund
from durable.tools.demo.support_agent import SupportInput
from durable.tools.demo.support_model import assistant, digest

NAME = "support-agent-pydantic-ai"
# The agent's bound on its own loop, as support-agent's step budget is: a model that keeps asking for tools is
# stopped (UsageLimitExceeded, a run FAILED for good), never loops forever.
REQUEST_LIMIT = 20
SYSTEM_PROMPT = ("You are a support agent for one order. Use the tools to read the order and the customer's past "
                 "tickets, propose a refund when the customer asks for one and it is due, email the customer what "
                 "was done, then answer in one short paragraph.")
REFUSED = "the model proposed"  # how a refusal of what the model chose begins (durable.bound_to_run)


@dataclass(frozen=True)
class SupportDeps:
    order_id: str  # the run's own order: the only one the tools act on


# -- the model: the demo's support model, spoken to in the chat-completions format ---------------------------------

def chat(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One turn of the demo's support model (scripted, or the endpoint), as a Pydantic AI model response."""
    model = support_model()
    reply = model.chat(chat_messages(messages, info.instructions), [_chat_tool(t) for t in info.function_tools])
    calls = [ToolCallPart(call["function"]["name"], call["function"].get("arguments") or "{}", tool_call_id=call["id"])
             for call in reply.get("tool_calls") or ()]
    text = [TextPart(reply["content"])] if reply.get("content") else []
    return ModelResponse(parts=[*text, *calls], model_name=model.name)


def chat_messages(messages: list[ModelMessage], instructions: str | None) -> list[dict[str, Any]]:
    """The conversation as a chat-completions model reads it: system, user, assistant (tool calls), tool answers."""
    system = [part.content for message in messages if isinstance(message, ModelRequest)
              for part in message.parts if isinstance(part, SystemPromptPart)]
    converted: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join([*system, *filter(None, [instructions])])}]
    for message in messages:
        if isinstance(message, ModelResponse):
            text = "".join(part.content for part in message.parts if isinstance(part, TextPart)) or None
            converted.append(assistant(text, [{"id": part.tool_call_id, "type": "function", "function": {
                "name": part.tool_name, "arguments": part.args_as_json_str()}}
                for part in message.parts if isinstance(part, ToolCallPart)]))
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                converted.append({"role": "user", "content": part.content if isinstance(part.content, str)
                                  else str(part.content)})
            elif isinstance(part, ToolReturnPart):
                converted.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()})
            elif isinstance(part, RetryPromptPart) and part.tool_name:
                converted.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                  "content": json.dumps({"error": part.model_response()})})
    return converted


def _chat_tool(tool: ToolDefinition) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description or "",
                                             "parameters": tool.parameters_json_schema}}


# -- the agent -----------------------------------------------------------------------------------------------------

agent: Agent[SupportDeps, str] = Agent(FunctionModel(chat, model_name="demo-support-model"), name="support",
                                       deps_type=SupportDeps, system_prompt=SYSTEM_PROMPT)


def the_runs_order(ctx: RunContext[SupportDeps], order_id: str) -> None:
    """An order the model names must be the run's own (invariant 13): refused before the tool runs, and told."""
    try:
        bound_to_run(order_id, expected=ctx.deps.order_id, what="order", source="the model")
    except UntrustedOutputRefused as refused:
        raise ToolFailed(str(refused)) from None


def a_refund_of_the_runs_order(ctx: RunContext[SupportDeps], order_id: str, reason: str) -> None:
    the_runs_order(ctx, order_id)  # checked before anyone is asked to approve it


@agent.tool(args_validator=the_runs_order)
def lookup_order(ctx: RunContext[SupportDeps], order_id: str) -> dict[str, Any]:
    """Read the order: customer, amount, currency, status, what was refunded.

    Args:
        order_id: the order's id, ORD-...
    """
    return downstreams.get_order(order_id)


@agent.tool(args_validator=the_runs_order)
def past_tickets(ctx: RunContext[SupportDeps], order_id: str) -> dict[str, Any]:
    """The support tickets of the customer who placed the order, across their orders.

    Args:
        order_id: the order's id, ORD-...
    """
    return downstreams.customer_tickets(order_id)


@agent.tool(requires_approval=True, args_validator=a_refund_of_the_runs_order)
def propose_refund(ctx: RunContext[SupportDeps], order_id: str, reason: str) -> Operation:
    """Refund what is left of the order. A human approves it before any money moves.

    Args:
        order_id: the order's id, ORD-...
        reason: why the customer should be refunded
    """
    refund = approved(ctx)  # exactly what the human approved, revalidated: nothing of it from the model
    return Operation(business_key=ctx.deps.order_id, payload={
        "order_id": refund["target"], "amount": refund["amount"], "currency": refund["currency"]})


@agent.tool
def send_email(ctx: RunContext[SupportDeps], subject: str, body: str) -> Operation:
    """Email the customer who placed the order.

    Args:
        subject: the email's subject
        body: the email's text
    """
    if not subject or not body:
        raise ToolFailed("send_email needs a subject and a body")
    customer = downstreams.get_order(ctx.deps.order_id)["customer"]  # to whom: the order's, never the model's choice
    # One email per subject: the same email asked again is the one sent; another text under it is refused.
    return Operation(business_key=f"{ctx.deps.order_id}:email:{digest(subject)}",
                     payload={"to": customer, "message": f"{subject}\n\n{body}"})


support = DurableAgent(
    agent,
    side_effects={"propose_refund": SideEffectTool("refund", downstreams.payments),
                  "send_email": SideEffectTool("email", downstreams.notifications)},
    approvals={"propose_refund": Approval(
        "refund", snapshot=lambda args: refund_facts(args["order_id"]), approve=refund_to_approve,
        revalidate=revalidate_refund, expires_in=timedelta(days=3), on_invalid="ask_again", on_expiry="fail",
        approvers=refund_approvers)},
)


# -- the workflow --------------------------------------------------------------------------------------------------

class SupportConversation(SupportInput):
    messages: list[dict[str, Any]] = Field(default_factory=list)  # the agent's conversation, as Pydantic AI keeps it
    answer: str | None = None


support_agent_pydantic_ai = register(Workflow(
    name=NAME, version=1, state=SupportConversation, input=SupportInput, checkpoint_schema_version=1,
    # What the agent is made of: a run paused for a refund's approval is not resumed under another system prompt,
    # model or tool set (BLOCKED_VERSION until an operator migrates or cancels it).
    prompt_release=support.prompt_release, tool_catalog_version=support.tool_catalog_version,
    model_policy_version="policy-1", pinned=("prompt_release", "tool_catalog_version", "model_policy_version"),
    retry=RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10),
))


@support_agent_pydantic_ai.step(side_effects=["refund", "email"])
def converse(ctx: Context, state: SupportConversation) -> SupportConversation:
    result = support.run(ctx, state.customer_message, deps=SupportDeps(state.order_id),
                         usage_limits=UsageLimits(request_limit=REQUEST_LIMIT))
    state.messages = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
    state.answer = result.output
    return state


@support_agent_pydantic_ai.output
def outcome(state: SupportConversation) -> dict[str, Any]:
    messages = ModelMessagesTypeAdapter.validate_python(state.messages)
    calls = [part for m in messages if isinstance(m, ModelResponse) for part in m.parts if isinstance(part, ToolCallPart)]
    returns = [part for m in messages if isinstance(m, ModelRequest) for part in m.parts
               if isinstance(part, ToolReturnPart)]
    done = [cast(dict[str, Any], part.content) for part in returns
            if part.outcome == "success" and isinstance(part.content, dict)]
    return {
        "answer": state.answer,
        "tools_called": [call.tool_name for call in calls],
        "refund_id": next((d.get("refund_id") for d in done if "refund_id" in d), None),
        "email_ids": list(dict.fromkeys(d["notification_id"] for d in done if "notification_id" in d)),
        "refused": [str(part.content) for part in returns
                    if part.outcome == "failed" and str(part.content).startswith(REFUSED)],
    }
