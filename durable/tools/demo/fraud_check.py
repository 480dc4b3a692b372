"""fraud-check: the small workflow `support-agent` delegates a large refund's fraud check to, as a child run.

One step reads the customer's past tickets (a recorded activity) and scores the refund: a customer with several
refunds already is held for a human's eye. The parent waits for it without holding a worker (`ctx.wait_child`),
and a cancel of the parent cancels it.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from durable import Context, RetryPolicy, Workflow, register
from durable.tools.demo import downstreams

REFUNDS_BEFORE_HOLD = 3  # a customer refunded this many times before is held


class FraudCheckInput(BaseModel):
    order_id: str = Field(pattern=r"^ORD-\d+$")
    amount: str


class FraudCheckState(FraudCheckInput):
    risk: str = ""
    reason: str = ""


fraud_check = register(Workflow(
    name="fraud-check", version=1, state=FraudCheckState, input=FraudCheckInput,
    # No model: its releases are its own rules' (docs/workflows.md#releases).
    tool_catalog_version="fraud-tools-1", prompt_release="none", model_policy_version="fraud-rules-1",
    retry=RetryPolicy(max_attempts=4, initial_interval=0.5, max_interval=10)))


@fraud_check.step
def score(ctx: Context, state: FraudCheckState) -> FraudCheckState:
    history = ctx.activity("tools.past_tickets", downstreams.customer_tickets, state.order_id)
    refunds = [ticket for ticket in history.get("tickets") or () if "refund" in str(ticket).lower()]
    held = len(refunds) >= REFUNDS_BEFORE_HOLD
    state.risk = "high" if held else "low"
    state.reason = (f"{len(refunds)} earlier refund ticket(s) for {history.get('customer', 'this customer')}"
                    + (": a human should look first" if held else ""))
    return state


@fraud_check.output
def verdict(state: FraudCheckState) -> dict[str, Any]:
    return {"order_id": state.order_id, "risk": state.risk, "reason": state.reason}
