"""A workflow for the trace tests: a model call in an activity, an approval, a side effect. Registered in the test
process only (the tests advance it here)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable import Workflow, register
from durable.downstream import get_downstream
from durable.tracing import model_call
from tests.durable.ledger_workflows import probe  # noqa: F401  registers the probe downstream
from tests.durable.visit_workflows import still_holds

MODEL = "gpt-4o-mini"


class TracedInput(BaseModel):
    order: str = "ORD-9"


class TracedState(TracedInput):
    plan: dict[str, Any] = {}
    customer: dict[str, Any] = {}
    approval: dict[str, Any] = {}
    refund: dict[str, Any] = {}


traced = register(Workflow(name="test-traced", version=1, state=TracedState, input=TracedInput))


def ask_model(order: str) -> dict[str, Any]:
    """The LLM call an activity makes: it says which model answered and the tokens it took."""
    model_call(MODEL, 120, 30)
    return {"action": "refund", "order": order, "amount": "25.00"}


@traced.step
def plan(ctx: Any, state: TracedState) -> TracedState:
    state.plan = ctx.activity("llm.plan", ask_model, state.order)
    return state


@traced.step
def approve(ctx: Any, state: TracedState) -> TracedState:
    state.customer = ctx.activity("crm.read", lambda: {"order": state.order, "tier": "gold"})
    state.approval = ctx.request_approval("refund", snapshot={"order": state.order, "amount": state.plan["amount"]},
                                          approve={"action": "refund", "amount": state.plan["amount"]},
                                          revalidate=still_holds, expires_in=timedelta(hours=1))
    return state


@traced.step(side_effects=["refund"])
def pay(ctx: Any, state: TracedState) -> TracedState:
    state.refund = ctx.side_effect("refund", business_key=state.order, downstream=get_downstream("probe"),
                                   payload={"amount": state.plan["amount"]})
    return state


# A model call told of after the activity returned (as a usage hook reading the answer would): it is still the
# activity's, and took the activity's time.
told_after = register(Workflow(name="test-traced-usage", version=1, state=TracedState, input=TracedInput))


@told_after.step
def ask(ctx: Any, state: TracedState) -> TracedState:
    state.plan = ctx.activity("llm.ask", lambda: {"model": MODEL, "usage": [80, 12]})
    model_call(state.plan["model"], *state.plan["usage"])
    return state
