"""claims-agent: plan a customer's claim with an LLM, read the order, propose a refund."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from durable import NonRetryableError, RetryPolicy, Workflow, register
from durable.demo import downstreams
from durable.demo.llm import planner_model


class ClaimInput(BaseModel):
    order_id: str = Field(pattern=r"^ORD-\d+$", description="the order the claim is about")
    customer_message: str = Field(min_length=1, max_length=4000)


class ClaimState(BaseModel):
    order_id: str
    customer_message: str
    plan: dict[str, Any] | None = None
    order: dict[str, Any] | None = None
    proposed_refund: dict[str, Any] | None = None


claims_agent = register(
    Workflow(
        name="claims-agent",
        version=1,
        state=ClaimState,
        input=ClaimInput,
        checkpoint_schema_version=1,
        tool_catalog_version="tools-2026.11",
        prompt_release="claims-planner-3",
        model_policy_version="policy-1",
        retry=RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10),
    )
)


@claims_agent.step
def planner(ctx: Any, state: ClaimState) -> ClaimState:
    model = planner_model()
    state.plan = ctx.activity("llm.plan", model.plan, state.customer_message)
    return state


@claims_agent.step
def lookup(ctx: Any, state: ClaimState) -> ClaimState:
    order_id = (state.plan or {}).get("order_id") or state.order_id
    state.order = ctx.activity("orders.get", downstreams.get_order, order_id)
    return state


@claims_agent.step
def propose_refund(ctx: Any, state: ClaimState) -> ClaimState:
    plan, order = state.plan or {}, state.order or {}
    if plan.get("intent") != "refund":
        raise NonRetryableError("the planner found no refund request in the message", kind="business_rejection")
    refundable = Decimal(order["amount"]) - Decimal(order.get("refunded_amount", "0"))
    state.proposed_refund = {
        "order_id": order["order_id"],
        "amount": str(refundable),
        "currency": order["currency"],
        "customer": order["customer"],
        "reason": plan.get("reason", ""),
    }
    return state


@claims_agent.output
def proposal(state: ClaimState) -> dict[str, Any]:
    return {"proposed_refund": state.proposed_refund, "plan": state.plan}
