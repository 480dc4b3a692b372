"""The refund approval's business facts: what the approver sees, and the preconditions re-read before acting."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from durable import Revalidation
from durable.tools.demo import downstreams

TWO_APPROVERS_ABOVE = Decimal("1000")  # refunds over this need two different approvers


def refund_facts(order_id: str) -> dict[str, Any]:
    """The order as it is now: the snapshot an approver sees."""
    order = downstreams.get_order(order_id)
    return {key: order.get(key) for key in ("order_id", "customer", "amount", "refunded_amount", "currency")}


def refund_to_approve(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Exactly what the approver approves: refund what is left of the order, to this order."""
    refundable = Decimal(snapshot["amount"]) - Decimal(snapshot.get("refunded_amount") or "0")
    return {"action": "refund", "target": snapshot["order_id"], "amount": str(refundable),
            "currency": snapshot["currency"]}


def approvers_for(amount: str) -> int:
    return 2 if Decimal(amount) > TWO_APPROVERS_ABOVE else 1


def refund_approvers(snapshot: dict[str, Any]) -> int:
    """How many approvers the refund these facts call for needs: the one rule for every ask and decision."""
    return approvers_for(refund_to_approve(snapshot)["amount"])


def revalidate_refund(snapshot: dict[str, Any]) -> Revalidation:
    """Is the order still unrefunded, and is its amount what the approver saw?"""
    current = refund_facts(snapshot["order_id"])
    problems = []
    if Decimal(current["refunded_amount"] or "0") > 0:
        problems.append(f"the order has already been refunded {current['refunded_amount']} {current['currency']}")
    if Decimal(current["amount"]) != Decimal(snapshot["amount"]):
        problems.append(f"the order amount changed from {snapshot['amount']} to {current['amount']}")
    if current["currency"] != snapshot["currency"]:
        problems.append(f"the currency changed from {snapshot['currency']} to {current['currency']}")
    return Revalidation(current=current, problems=tuple(problems), approvers_required=refund_approvers(current))
