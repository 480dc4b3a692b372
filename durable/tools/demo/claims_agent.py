"""claims-agent: plan a claim with an LLM, read the order, refund it, open a ticket, tell the customer.

Version 1: planner -> lookup -> propose_refund -> payment -> ticket -> notify.
Version 2 checks the risk and asks a human before paying:
planner -> lookup -> risk_check -> approval -> payment -> ticket -> notify.
Both stay registered: runs started on version 1 finish on version 1.
"""
from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from durable import Context, NonRetryableError, OnActiveBusinessKey, RetryPolicy, Workflow, bound_to_run, register
from durable.tools.demo import downstreams
from durable.tools.demo.llm import planner_model
from durable.tools.demo.refund_checks import (
    approvers_for,
    refund_approvers,
    refund_facts,
    refund_to_approve,
    revalidate_refund,
)


class ClaimInput(BaseModel):
    order_id: str = Field(pattern=r"^ORD-\d+$", description="the order the claim is about")
    customer_message: str = Field(min_length=1, max_length=4000)


class ClaimState(BaseModel):
    order_id: str
    customer_message: str
    plan: dict[str, Any] | None = None
    order: dict[str, Any] | None = None
    proposed_refund: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None
    ticket: dict[str, Any] | None = None
    notification: dict[str, Any] | None = None


# What both versions run under: the same tools, prompts, model policy and retry policy.
RELEASES: dict[str, Any] = {
    "tool_catalog_version": "tools-2026.11",
    "prompt_release": "claims-planner-3",
    "model_policy_version": "policy-1",
    "retry": RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10),
}

# A second claim for an order whose claim is still being handled is the same claim sent twice (a double
# submit, a retried webhook): the start answers with the run already handling it, never a second refund run.
ONE_CLAIM_AT_A_TIME = OnActiveBusinessKey.RETURN_EXISTING

claims_agent = register(Workflow(name="claims-agent", version=1, state=ClaimState, input=ClaimInput,
                                 checkpoint_schema_version=1, on_active_business_key=ONE_CLAIM_AT_A_TIME, **RELEASES))


@claims_agent.step
def planner(ctx: Context, state: ClaimState) -> ClaimState:
    model = planner_model()
    state.plan = ctx.activity("llm.plan", model.plan, state.customer_message)
    return state


@claims_agent.step
def lookup(ctx: Context, state: ClaimState) -> ClaimState:
    # The planner read the customer's text: the order it names must be the run's own (invariant 13).
    order_id = bound_to_run((state.plan or {}).get("order_id"), expected=state.order_id, what="order")
    state.order = ctx.activity("orders.get", downstreams.get_order, order_id)
    return state


Claim = TypeVar("Claim", bound="ClaimState")  # v2's risk_check calls v1's step on its own state


@claims_agent.step
def propose_refund(ctx: Context, state: Claim) -> Claim:
    plan, order = state.plan or {}, state.order or {}
    if plan.get("intent") != "refund":
        raise NonRetryableError("the planner found no refund request in the message", kind="business_rejection")
    bound_to_run(order.get("order_id"), expected=state.order_id, what="order", source="the order lookup")
    refundable = Decimal(order["amount"]) - Decimal(order.get("refunded_amount", "0"))
    state.proposed_refund = {
        "order_id": order["order_id"],
        "amount": str(refundable),
        "currency": order["currency"],
        "customer": order["customer"],
        "reason": plan.get("reason", ""),
    }
    return state


@claims_agent.step(side_effects=["refund"])
def payment(ctx: Context, state: ClaimState) -> ClaimState:
    proposal = state.proposed_refund or {}
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=downstreams.payments, payload={
        "order_id": proposal["order_id"], "amount": proposal["amount"], "currency": proposal["currency"],
    })
    return state


@claims_agent.step(side_effects=["ticket"])
def ticket(ctx: Context, state: ClaimState) -> ClaimState:
    refund = state.refund or {}
    state.ticket = ctx.side_effect("ticket", business_key=state.order_id, downstream=downstreams.tickets, payload={
        "subject": f"Refund {refund.get('external_ref')} for {state.order_id}",
        "body": (state.proposed_refund or {}).get("reason", ""),
    })
    return state


@claims_agent.step(side_effects=["notify"])
def notify(ctx: Context, state: ClaimState) -> ClaimState:
    refund = state.refund or {}
    state.notification = ctx.side_effect("notify", business_key=state.order_id, downstream=downstreams.notifications,
                                         payload={
        "to": (state.order or {}).get("customer", "customer"),
        "message": f"We refunded {refund.get('amount')} {refund.get('currency')} for {state.order_id}.",
    })
    return state


@claims_agent.output
def outcome(state: ClaimState) -> dict[str, Any]:
    return {
        "proposed_refund": state.proposed_refund,
        "plan": state.plan,
        "refund_id": (state.refund or {}).get("external_ref"),
        "ticket_id": (state.ticket or {}).get("external_ref"),
        "notification_id": (state.notification or {}).get("external_ref"),
    }


# Version 2: a risk check and a human approval before any money moves.

class ClaimStateV2(ClaimState):
    risk: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None


claims_agent_v2 = register(Workflow(
    name="claims-agent", version=2, state=ClaimStateV2, input=ClaimInput, checkpoint_schema_version=1, **RELEASES,
    on_active_business_key=ONE_CLAIM_AT_A_TIME,
    # A run paused for approval must not continue planning under another prompt release.
    pinned=("prompt_release", "model_policy_version"),
))
claims_agent_v2.step(planner)
claims_agent_v2.step(lookup)


@claims_agent_v2.step
def risk_check(ctx: Context, state: ClaimStateV2) -> ClaimStateV2:
    state = propose_refund(ctx, state)
    amount = (state.proposed_refund or {})["amount"]
    approvers = approvers_for(amount)
    state.risk = {"level": "high" if approvers > 1 else "normal", "approvers_required": approvers,
                  "reasons": [f"refund of {amount} is over the two-approver threshold"] if approvers > 1 else []}
    return state


@claims_agent_v2.step
def approval(ctx: Context, state: ClaimStateV2) -> ClaimStateV2:
    order_id = (state.proposed_refund or {})["order_id"]
    state.approval = ctx.request_approval(
        "refund",
        snapshot=lambda: refund_facts(order_id),
        approve=refund_to_approve,
        revalidate=revalidate_refund,
        expires_in=timedelta(days=3),
        on_invalid="ask_again",
        on_expiry="fail",
        approvers=refund_approvers,  # from the snapshot this request shows, at every ask
    )
    return state


@claims_agent_v2.step(name="payment", side_effects=["refund"])
def pay_approved_refund(ctx: Context, state: ClaimStateV2) -> ClaimStateV2:
    approved = (state.approval or {})["object"]  # pay exactly what was approved, nothing recomputed
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=downstreams.payments, payload={
        "order_id": approved["target"], "amount": approved["amount"], "currency": approved["currency"],
    })
    return state


claims_agent_v2.step(ticket, side_effects=["ticket"])
claims_agent_v2.step(notify, side_effects=["notify"])
claims_agent_v2.output(outcome)
