"""support-agent-openai-agents: the support agent written with the OpenAI Agents SDK, run durably by DurableAgent.

The same conversation as `support-agent` (durable/tools/demo/support_agent.py) and its Pydantic AI twin, the same
tools and the same model, but the loop is the SDK's `Runner`: one step, `converse`, runs the agent; durable records
each of its model requests and tool calls, performs its refund and its emails through the ledger, and asks a
human before the refund.

- `lookup_order` and `past_tickets`, asked for together, run at once (one `ctx.parallel` group);
- `propose_refund` needs approval (`needs_approval=True`, and an `Approval` saying how to ask): durable asks in the
  inbox, revalidates, and the tool refunds exactly what was approved (`approved()`), through the ledger;
- `send_email` emails the customer who placed the order: the tool reads who that is, and says what to send.

The model never chooses what is acted on (invariant 13): an order it names that is not the run's is refused by the
tools' input guardrail before the tool runs (and before anyone is asked to approve it), and the model is told.

Its model is the demo's (durable/tools/demo/llm.py): the scripted support model, or the OpenAI-compatible endpoint
when DURABLE_LLM_BASE_URL is set, reached through an `agents.Model` that speaks the chat-completions format.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from agents import (
    Agent,
    FunctionTool,
    ModelResponse,
    RunContextWrapper,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    Usage,
    function_tool,
    tool_input_guardrail,
)
from agents.models.chatcmpl_converter import Converter
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic import Field

from durable import Context, RetryPolicy, UntrustedOutputRefused, Workflow, bound_to_run, register
from durable.agents.openai_agents import Approval, DurableAgent, Operation, SideEffectTool, approved
from durable.tools.demo import downstreams
from durable.tools.demo.llm import support_model
from durable.tools.demo.refund_checks import refund_approvers, refund_facts, refund_to_approve, revalidate_refund
from durable.tools.demo.support_agent import SupportInput
from durable.tools.demo.support_model import digest

NAME = "support-agent-openai-agents"
# The agent's bound on its own loop, as support-agent's step budget is: a model that keeps asking for tools is
# stopped (MaxTurnsExceeded, a run FAILED for good), never loops forever.
MAX_TURNS = 20
INSTRUCTIONS = ("You are a support agent for one order. Use the tools to read the order and the customer's past "
                "tickets, propose a refund when the customer asks for one and it is due, email the customer what "
                "was done, then answer in one short paragraph.")
REFUSED = "the model proposed"  # how a refusal of what the model chose begins (durable.bound_to_run)


@dataclass(frozen=True)
class SupportDeps:
    order_id: str  # the run's own order: the only one the tools act on


# -- the model: the demo's support model, spoken to in the chat-completions format ---------------------------------

class DemoSupportModel(Model):
    """One turn of the demo's support model (scripted, or the endpoint), as the SDK's model response."""

    @property
    def model(self) -> str:
        """The name its usage is metered and priced under: the support model's (scripted, or the endpoint's)."""
        return support_model().name

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any,
                           tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: Any,
                           **_: Any) -> ModelResponse:
        messages: list[dict[str, Any]] = [{"role": "system", "content": system_instructions or ""},
                                          *cast(list[dict[str, Any]], Converter.items_to_messages(input))]
        chat_tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                         "parameters": t.params_json_schema}}
                      for t in tools if isinstance(t, FunctionTool)]
        reply = support_model().chat(messages, chat_tools)
        output: list[Any] = [ResponseFunctionToolCall(
            id=call["id"], call_id=call["id"], name=call["function"]["name"], type="function_call",
            arguments=call["function"].get("arguments") or "{}") for call in reply.get("tool_calls") or ()]
        if reply.get("content"):
            output.insert(0, ResponseOutputMessage(
                id="msg", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=reply["content"], annotations=[])]))
        used = reply.get("usage") or {}
        usage = Usage(requests=1, input_tokens=used.get("input_tokens", 0), output_tokens=used.get("output_tokens", 0),
                      total_tokens=used.get("input_tokens", 0) + used.get("output_tokens", 0))
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the demo's model answers whole responses")


# -- the agent -----------------------------------------------------------------------------------------------------

@tool_input_guardrail
def the_runs_order(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    """An order the model names must be the run's own (invariant 13): refused before the tool runs, and told."""
    order_id = json.loads(data.context.tool_arguments or "{}").get("order_id", "")
    try:
        bound_to_run(order_id, expected=data.context.context.order_id, what="order", source="the model")
    except UntrustedOutputRefused as refused:
        return ToolGuardrailFunctionOutput.reject_content(str(refused))
    return ToolGuardrailFunctionOutput.allow()


@function_tool(tool_input_guardrails=[the_runs_order], failure_error_function=None)
def lookup_order(ctx: RunContextWrapper[SupportDeps], order_id: str) -> dict[str, Any]:
    """Read the order: customer, amount, currency, status, what was refunded.

    Args:
        order_id: the order's id, ORD-...
    """
    return downstreams.get_order(order_id)


@function_tool(tool_input_guardrails=[the_runs_order], failure_error_function=None)
def past_tickets(ctx: RunContextWrapper[SupportDeps], order_id: str) -> dict[str, Any]:
    """The support tickets of the customer who placed the order, across their orders.

    Args:
        order_id: the order's id, ORD-...
    """
    return downstreams.customer_tickets(order_id)


@function_tool(tool_input_guardrails=[the_runs_order], failure_error_function=None, needs_approval=True)
def propose_refund(ctx: RunContextWrapper[SupportDeps], order_id: str, reason: str) -> Operation:
    """Refund what is left of the order. A human approves it before any money moves.

    Args:
        order_id: the order's id, ORD-...
        reason: why the customer should be refunded
    """
    refund = approved()  # exactly what the human approved, revalidated: nothing of it from the model
    return Operation(business_key=ctx.context.order_id, payload={
        "order_id": refund["target"], "amount": refund["amount"], "currency": refund["currency"]})


@function_tool(failure_error_function=None)
def send_email(ctx: RunContextWrapper[SupportDeps], subject: str, body: str) -> Operation | str:
    """Email the customer who placed the order.

    Args:
        subject: the email's subject
        body: the email's text
    """
    if not subject or not body:
        return "send_email needs a subject and a body"
    customer = downstreams.get_order(ctx.context.order_id)["customer"]  # to whom: the order's, never the model's
    # One email per subject: the same email asked again is the one sent; another text under it is refused.
    return Operation(business_key=f"{ctx.context.order_id}:email:{digest(subject)}",
                     payload={"to": customer, "message": f"{subject}\n\n{body}"})


agent: Agent[SupportDeps] = Agent(name="support", instructions=INSTRUCTIONS, model=DemoSupportModel(),
                                  tools=[lookup_order, past_tickets, propose_refund, send_email])

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
    items: list[dict[str, Any]] = Field(default_factory=list)  # the run's items, as the SDK's to_input_list() gives
    answer: str | None = None


support_agent_openai_agents = register(Workflow(
    name=NAME, version=1, state=SupportConversation, input=SupportInput, checkpoint_schema_version=1,
    # What the agent is made of: a run paused for a refund's approval is not resumed under other instructions,
    # model or tool set (BLOCKED_VERSION until an operator migrates or cancels it).
    prompt_release=support.prompt_release, tool_catalog_version=support.tool_catalog_version,
    model_policy_version="policy-1", pinned=("prompt_release", "tool_catalog_version", "model_policy_version"),
    retry=RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10),
))


@support_agent_openai_agents.step(side_effects=["refund", "email"])
def converse(ctx: Context, state: SupportConversation) -> SupportConversation:
    result = support.run(ctx, state.customer_message, context=SupportDeps(state.order_id), max_turns=MAX_TURNS)
    state.items = json.loads(json.dumps(result.to_input_list(), default=str))
    state.answer = str(result.final_output)
    return state


@support_agent_openai_agents.output
def outcome(state: SupportConversation) -> dict[str, Any]:
    calls = {item["call_id"]: item["name"] for item in state.items if item.get("type") == "function_call"}
    answers = [(calls.get(item["call_id"], ""), str(item.get("output", ""))) for item in state.items
               if item.get("type") == "function_call_output"]
    done = [json.loads(text) for _, text in answers if text.startswith("{")]
    return {
        "answer": state.answer,
        "tools_called": [item["name"] for item in state.items if item.get("type") == "function_call"],
        "refund_id": next((d.get("refund_id") for d in done if "refund_id" in d), None),
        "email_ids": list(dict.fromkeys(d["notification_id"] for d in done if "notification_id" in d)),
        "refused": [text for _, text in answers if text.startswith(REFUSED)],
    }
