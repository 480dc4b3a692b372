"""The steps both deploys share: read the order, ask for the refund, pay exactly what was approved."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable.tools.demo import downstreams
from durable.tools.demo.refund_checks import refund_facts, refund_to_approve, revalidate_refund
from durable.workflow import Workflow

NAME = "test-refund-deploy"


class RefundInput(BaseModel):
    order_id: str


class RefundState(RefundInput):
    order: dict[str, Any] | None = None
    risk: str | None = None
    approval: dict[str, Any] | None = None
    refund: dict[str, Any] | None = None


def lookup(ctx: Any, state: RefundState) -> RefundState:
    state.order = ctx.activity("orders.get", downstreams.get_order, state.order_id)
    return state


def risk_check(ctx: Any, state: RefundState) -> RefundState:
    state.risk = "low"
    return state


def approval(ctx: Any, state: RefundState) -> RefundState:
    state.approval = ctx.request_approval(
        "refund", snapshot=lambda: refund_facts(state.order_id), approve=refund_to_approve,
        revalidate=revalidate_refund, expires_in=timedelta(days=7))
    return state


def payment(ctx: Any, state: RefundState) -> RefundState:
    approved = (state.approval or {})["object"]
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=downstreams.payments,
                                   payload={"order_id": approved["target"], "amount": approved["amount"],
                                            "currency": approved["currency"]})
    return state


def build(version: int, steps: list[Any], **options: Any) -> Workflow:
    wf = Workflow(name=NAME, version=version, state=RefundState, input=RefundInput, **options)
    for fn in steps:
        wf.step(fn, side_effects=["refund"] if fn is payment else [])
    return wf
