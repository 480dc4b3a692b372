"""support-agent: a tool-calling loop, in the chat-completions format, with its model's output untrusted.

think -> act -> think -> ... -> answer. `think` asks the model once per visit (an activity) and goes to `act`
when the model asked for tools, to `answer` when it answered. `act` runs the tools the model asked for and
hands their answers back as `tool` messages, then loops back to `think`:

- `lookup_order` and `past_tickets`, asked for together, run at once (`ctx.parallel`);
- `propose_refund` asks a human (`ctx.request_approval`, revalidated right before the money moves, as the
  claims agent does), then refunds exactly what was approved through the ledger;
- `send_email` emails the customer who placed the order, a side effect with a business key of its own; the
  emails asked for in one turn go out at once (`ctx.parallel`);
- `ask_customer` emails a question and waits for the customer's reply, an event sent by the support desk's
  webhook (`ctx.wait_for_event`, up to DURABLE_DEMO_REPLY_SECONDS: two days unless the demo shortens it);
- `follow_up` sleeps (`ctx.sleep`, DURABLE_DEMO_FOLLOW_UP_SECONDS) and then emails the customer again;
- a refund above FRAUD_CHECK_ABOVE is first scored by a child run of `fraud-check` (`ctx.start_child`,
  `ctx.wait_child`); a high risk holds it, and the model is told why.

While it waits for the reply, the timer or the child, the run is parked WAITING: no worker holds it.

The model never chooses what is acted on (invariant 13): every order it names is checked against the run's
own (`bound_to_run`), the refund's amount and target come from the approved snapshot, the email goes to the
order's customer. A mismatch is refused and told to the model as the tool's error answer, and the run's
output lists it for the operator.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from durable import (
    ApprovalPreconditionFailed,
    ApprovalRejected,
    Budget,
    Context,
    OperationConflict,
    RetryPolicy,
    UntrustedOutputRefused,
    Workflow,
    bound_to_run,
    register,
)
from durable.conf import durable_settings
from durable.tools.demo import (
    downstreams,
    fraud_check,  # noqa: F401  registers the child workflow wherever this one is
)
from durable.tools.demo.llm import support_model
from durable.tools.demo.refund_checks import refund_approvers, refund_facts, refund_to_approve, revalidate_refund
from durable.tools.demo.support_model import SYSTEM_PROMPT, TOOLS, assistant_message, digest, reported_usage

# A conversation of 19 tool turns and its answer (think + act per turn, then think + answer); a model that
# keeps asking for tools past that is stopped by the step budget, visibly, instead of looping forever.
MAX_VISITS = 40
# What one conversation may spend on its model: a refund takes about 3,000 tokens; a model that goes on far past
# that stops before its next call and waits for an operator to raise the budget or cancel the run.
BUDGET = Budget(tokens=50_000)
LOOKUPS = {"lookup_order": downstreams.get_order, "past_tickets": downstreams.customer_tickets}
FRAUD_CHECK_ABOVE = Decimal("100.00")  # refunds above this are scored by a fraud-check child run first
REPLY = "customer_reply"  # the event the support desk's webhook sends with what the customer wrote back


class SupportInput(BaseModel):
    order_id: str = Field(pattern=r"^ORD-\d+$", description="the order the customer writes about")
    customer_message: str = Field(min_length=1, max_length=4000)


class SupportState(SupportInput):
    messages: list[dict[str, Any]] = Field(default_factory=list)  # the conversation, as the model reads it
    order: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None
    emails: list[dict[str, Any]] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)  # what the model asked for that was not its to choose
    answer: str | None = None


class CustomerReply(BaseModel):
    """The payload of a `customer_reply` event (checked when it is sent: 400 naming the field)."""

    text: str = Field(min_length=1, max_length=4000)


class ToolError(Exception):
    """A tool call the agent refuses or cannot make: its message is the tool's answer, and the model goes on."""


support_agent = register(Workflow(
    name="support-agent", version=1, state=SupportState, input=SupportInput, checkpoint_schema_version=1,
    tool_catalog_version="support-tools-2", prompt_release="support-agent-2", model_policy_version="policy-1",
    retry=RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10), max_visits=MAX_VISITS, budget=BUDGET,
    events={REPLY: CustomerReply},
    # A run paused for a refund's approval must not go on under another prompt or model policy.
    pinned=("prompt_release", "model_policy_version"),
))


@support_agent.initial_state
def conversation(data: BaseModel) -> SupportState:
    state = SupportState.model_validate(data.model_dump())
    state.messages = [{"role": "system", "content": SYSTEM_PROMPT.format(order_id=state.order_id)},
                      {"role": "user", "content": state.customer_message}]
    return state


@support_agent.step(next=["act", "answer"])
def think(ctx: Context, state: SupportState) -> Any:
    # One model call per visit: a visit re-executed after a crash takes its recorded answer, a later one asks.
    # A model call: what it used is recorded and priced with its answer, and the run's budget is checked first.
    reply = ctx.activity("llm.chat", support_model().chat, state.messages, TOOLS, usage=reported_usage)
    state.messages.append(assistant_message(reply))
    return support_agent.goto("act" if reply.get("tool_calls") else "answer", state)


@support_agent.step(next=["think"], side_effects=["refund", "email"])
def act(ctx: Context, state: SupportState) -> SupportState:
    # The approval and the side effects are called here, in the step's own body, where the launch checks read
    # them (durable/engine/step_source.py); the helpers below only parse, bind and shape.
    calls = state.messages[-1].get("tool_calls") or []
    # Answers by the call's place in the model's answer (ids are the model's: two calls may share one).
    answers = _look_up(ctx, state, {n: call for n, call in enumerate(calls) if _name(call) in LOOKUPS})
    emails: dict[int, Any] = {}  # the emails asked for in this turn: sent together, below
    for n, call in enumerate(calls):
        if n in answers:
            continue
        with _told_to_the_model(state, answers, n):
            name, arguments = _name(call), _arguments(call)
            if name == "propose_refund":
                order_id = _bound_order(state, arguments)
                if state.refund is None:  # asked again in a later turn: the refund already made is the answer
                    if _amount(state) > FRAUD_CHECK_ABOVE:  # scored by a child run; the parent waits, parked
                        verdict = ctx.wait_child(ctx.start_child(
                            "fraud-check", input={"order_id": order_id, "amount": str(_amount(state))},
                            business_key=f"{order_id}:fraud-check:{ctx.run_id}"))
                        if verdict["risk"] != "low":
                            raise ToolError(f"the fraud check held the refund: {verdict['reason']}")
                    approved = ctx.request_approval(
                        "refund", snapshot=functools.partial(refund_facts, order_id), approve=refund_to_approve,
                        revalidate=revalidate_refund, expires_in=timedelta(days=3), on_invalid="ask_again",
                        on_expiry="fail", approvers=refund_approvers)["object"]
                    # Exactly what was approved, to the order approved: nothing of it from the model.
                    state.refund = ctx.side_effect("refund", business_key=state.order_id,
                                                   downstream=downstreams.payments, payload={
                        "order_id": approved["target"], "amount": approved["amount"], "currency": approved["currency"]})
                answers[n] = _refunded(state.refund)
            elif name == "send_email":
                to, subject, message = _email(state, arguments)
                # One email per subject: the same email asked again is the one sent (a duplicate prevented).
                emails[n] = ctx.effect("email", business_key=f"{state.order_id}:email:{digest(subject)}",
                                       downstream=downstreams.notifications, payload={"to": to, "message": message})
            elif name == "ask_customer":
                to, subject, message = _email(state, {"subject": f"About your order {state.order_id}",
                                                      "body": str(arguments.get("question", ""))})
                sent = ctx.side_effect("email", business_key=f"{state.order_id}:ask:{digest(message)}",
                                       downstream=downstreams.notifications, payload={"to": to, "message": message})
                _emailed(state, sent)
                # Parked until the support desk's webhook sends the reply (or the deadline passes).
                reply = ctx.wait_for_event(REPLY, timeout=timedelta(seconds=durable_settings.DURABLE_DEMO_REPLY_SECONDS))
                answers[n] = {"reply": reply.payload.text} if reply else {
                    "error": "the customer did not reply in time"}
            elif name == "follow_up":
                ctx.sleep(timedelta(seconds=durable_settings.DURABLE_DEMO_FOLLOW_UP_SECONDS))  # parked, not a worker
                to, subject, message = _email(state, arguments)
                sent = ctx.side_effect("email", business_key=f"{state.order_id}:follow-up:{digest(subject)}",
                                       downstream=downstreams.notifications, payload={"to": to, "message": message})
                answers[n] = _emailed(state, sent)
            else:
                raise ToolError(f"there is no tool {name!r}; the tools are "
                                f"{', '.join(tool['function']['name'] for tool in TOOLS)}")
    for n, sent in _sent_together(ctx, state, emails, answers).items():
        answers[n] = _emailed(state, sent)
    state.messages += [{"role": "tool", "tool_call_id": call.get("id"), "content": json.dumps(answers[n])}
                       for n, call in enumerate(calls)]
    return state


@support_agent.step
def answer(ctx: Context, state: SupportState) -> Any:
    state.answer = state.messages[-1].get("content") or ""
    return support_agent.finish(state)


@support_agent.output
def outcome(state: SupportState) -> dict[str, Any]:
    return {
        "answer": state.answer,
        "tools_called": [_name(call) for message in state.messages for call in message.get("tool_calls") or ()],
        "refund_id": (state.refund or {}).get("external_ref"),
        "email_ids": [email["external_ref"] for email in state.emails],
        "refused": state.refused,
    }


# The tools.

def _name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name", ""))


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads((call.get("function") or {}).get("arguments") or "{}")
    except ValueError:
        raise ToolError(f"the arguments of {_name(call)} are not JSON") from None
    if not isinstance(arguments, dict):
        raise ToolError(f"the arguments of {_name(call)} must be a JSON object")
    return arguments


@contextmanager
def _told_to_the_model(state: SupportState, answers: dict[int, Any], n: int) -> Iterator[None]:
    """A tool call refused or failed for a reason the model can act on: the reason is the call's answer.

    A refusal of what the model chose (an order not the run's) is kept for the operator too; a refund a
    human rejected (or whose facts fail before anyone is asked) and an email asked again with another text are the
    model's to tell the customer."""
    try:
        yield
    except UntrustedOutputRefused as refused:
        state.refused.append(str(refused))
        answers[n] = {"error": str(refused)}
    except ToolError as error:
        answers[n] = {"error": str(error)}
    except OperationConflict:
        answers[n] = {"error": "this was already done once with another text or amount; it was not done again"}
    except ApprovalRejected as error:
        answers[n] = {"error": f"a human rejected the refund: {error}"}
    except ApprovalPreconditionFailed as error:  # nobody was asked: the order cannot be refunded as it is now
        answers[n] = {"error": f"the refund cannot be proposed: {'; '.join(error.problems)}"}


def _look_up(ctx: Context, state: SupportState, calls: dict[int, dict[str, Any]]) -> dict[int, Any]:
    """The lookups the model asked for, made at once; each recorded under its own index, in the order asked."""
    answers: dict[int, Any] = {}
    allowed: list[int] = []
    for n, call in calls.items():
        with _told_to_the_model(state, answers, n):
            _bound_order(state, _arguments(call))
            allowed.append(n)
    results = ctx.parallel(*(ctx.call(f"tools.{_name(calls[n])}", LOOKUPS[_name(calls[n])], state.order_id)
                             for n in allowed)) if allowed else []
    for n, result in zip(allowed, results, strict=True):
        answers[n] = result
        if _name(calls[n]) == "lookup_order":
            state.order = result
    return answers


def _bound_order(state: SupportState, arguments: dict[str, Any]) -> str:
    # The model read the customer's text: the order it names must be the run's own (invariant 13).
    return bound_to_run(arguments.get("order_id"), expected=state.order_id, what="order", source="the model")


def _amount(state: SupportState) -> Decimal:
    """What is left to refund of the order, as the lookup read it (never from the model)."""
    order = state.order or {}
    return Decimal(str(order.get("amount") or "0")) - Decimal(str(order.get("refunded_amount") or "0"))


def _refunded(refund: dict[str, Any] | None) -> dict[str, Any]:
    return {key: (refund or {}).get(key) for key in ("refund_id", "order_id", "amount", "currency", "status")}


def _email(state: SupportState, arguments: dict[str, Any]) -> tuple[str, str, str]:
    """To whom (the order's customer, never an address the model wrote), the subject and the message."""
    subject, body = str(arguments.get("subject") or ""), str(arguments.get("body") or "")
    if not subject or not body:
        raise ToolError("send_email needs a subject and a body")
    if state.order is None:
        raise ToolError("look the order up first: the email goes to the customer who placed it")
    return state.order["customer"], subject, f"{subject}\n\n{body}"


def _sent_together(ctx: Context, state: SupportState, emails: dict[int, Any], answers: dict[int, Any]) -> dict[int, Any]:
    """The turn's emails, sent at once (`ctx.parallel`), each a side effect of its own through the ledger.

    An email asked before with another text is refused as the group is prepared, before anything is sent;
    then each goes alone, so that only that one is refused (and told to the model)."""
    if not emails:
        return {}
    try:
        return dict(zip(emails, ctx.parallel(*emails.values()), strict=True))
    except OperationConflict:
        sent = {}
        for n, email in emails.items():
            with _told_to_the_model(state, answers, n):
                sent[n] = ctx.side_effect(email.action, business_key=email.business_key, downstream=email.downstream,
                                          payload=email.payload)
        return sent


def _emailed(state: SupportState, sent: dict[str, Any]) -> dict[str, Any]:
    if sent not in state.emails:  # an email asked for again in a later turn is the one already sent
        state.emails.append(sent)
    return {"email_id": sent["external_ref"], "to": sent.get("to"), "status": sent.get("status")}
