"""shop-refund: read the order, ask a human, refund exactly what was approved, tell the customer.

Listed in DURABLE_WORKFLOW_MODULES, so every web and worker process registers it at start-up.
"""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, Field

from durable import Context, RetryPolicy, Revalidation, Workflow, register
from shop import downstream


class RefundInput(BaseModel):
    order_id: str = Field(pattern=r"^SO-\d+$")
    reason: str = Field(min_length=1, max_length=500)


class RefundState(BaseModel):
    order_id: str
    reason: str
    order: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None
    notice: dict[str, Any] | None = None


refund = register(Workflow(
    name="shop-refund", version=1, state=RefundState, input=RefundInput,
    # What its runs are held to across deploys (no LLM here: the releases name the shop's own rules).
    tool_catalog_version="shop-tools-1", prompt_release="none", model_policy_version="none",
    retry=RetryPolicy(max_attempts=3, initial_interval=0.2, max_interval=2),
))


def order_facts(order_id: str) -> dict[str, Any]:
    """The order as it is now: what the approver sees."""
    order = downstream.get_order(order_id)
    return {key: order[key] for key in ("order_id", "amount", "currency", "refunded")}


def refund_to_approve(facts: dict[str, Any]) -> dict[str, Any]:
    return {"action": "refund", "target": facts["order_id"], "amount": facts["amount"], "currency": facts["currency"]}


def revalidate_refund(snapshot: dict[str, Any]) -> Revalidation:
    """Still unrefunded, and still the amount the approver saw? Re-read before deciding and before paying."""
    current = order_facts(snapshot["order_id"])
    problems = []
    if current["refunded"]:
        problems.append("the order has been refunded already")
    if Decimal(current["amount"]) != Decimal(snapshot["amount"]):
        problems.append(f"the amount changed from {snapshot['amount']} to {current['amount']}")
    return Revalidation(current=current, problems=tuple(problems))


@refund.step
def load_order(ctx: Context, state: RefundState) -> RefundState:
    state.order = ctx.activity("orders.get", downstream.get_order, state.order_id)
    return state


@refund.step
def approval(ctx: Context, state: RefundState) -> RefundState:
    order_id = state.order_id
    state.approval = ctx.request_approval(
        "refund",
        snapshot=lambda: order_facts(order_id),
        approve=refund_to_approve,
        revalidate=revalidate_refund,
        expires_in=timedelta(days=2),
        on_invalid="ask_again",
        on_expiry="fail",
    )
    return state


@refund.step(side_effects=["refund"])
def pay(ctx: Context, state: RefundState) -> RefundState:
    approved = (state.approval or {})["object"]  # exactly what the approver approved
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=downstream.refunds, payload={
        "order_id": approved["target"], "amount": approved["amount"], "currency": approved["currency"]})
    return state


@refund.step(side_effects=["notice"])
def notify(ctx: Context, state: RefundState) -> RefundState:
    state.notice = ctx.side_effect("notice", business_key=state.order_id, downstream=downstream.notices, payload={
        "message": f"We refunded {(state.refund or {}).get('amount')} for {state.order_id}: {state.reason}"})
    return state


@refund.output
def outcome(state: RefundState) -> dict[str, Any]:
    return {"refund_id": (state.refund or {}).get("external_ref"), "notice_id": (state.notice or {}).get("external_ref")}
