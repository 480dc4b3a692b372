"""The shop's refund workflow tested with durable's test kit (docs/testing.md): in the test's own process, no
worker, no broker, the clock moved instead of waited for. Orders are read from the shop's service; refunds and
notices are answered by stand-ins that count every call per Idempotency-Key."""
from __future__ import annotations

import pytest

from durable.roles import APPROVER, OPERATOR
from durable.testing import DurableKit


def refund_for(kit: DurableKit, order_id: str, starter: object):
    return kit.start("shop-refund", {"order_id": order_id, "reason": "arrived broken"}, business_key=order_id,
                     user=starter).advance()


def test_a_refund_is_paid_once_though_the_worker_died_right_after_paying(durable_kit, service):
    service.state.add_order("SO-7", "42.00")
    refunds = durable_kit.stand_in("shop-refunds", answer=lambda key, business_key, payload: {**payload})
    notices = durable_kit.stand_in("shop-notices")
    clerk = durable_kit.user("clerk", OPERATOR, APPROVER, team="refunds")
    run = refund_for(durable_kit, "SO-7", clerk)
    assert run.status == "WAITING_APPROVAL"
    with pytest.raises(Exception, match="you started this run"):  # separation of duties
        run.approve(clerk)

    run.approve(durable_kit.user("ann", APPROVER, team="refunds"))
    crash = durable_kit.crash_at("after_downstream", action="refund")  # paid, the answer not yet recorded
    run.advance()
    assert crash.fired and run.status == "RUNNING"
    assert run.advance().status == "SUCCEEDED"
    [key] = refunds.calls_per_key()
    assert refunds.calls_per_key()[key] == 2 and refunds.effects == 1  # sent again with its key, paid once
    assert notices.effects == 1
    assert [(row.action_name, row.status) for row in run.ledger()] == [("refund", "SUCCEEDED"), ("notice", "SUCCEEDED")]


def test_a_refund_nobody_approves_within_two_days_fails_without_paying(durable_kit, service):
    service.state.add_order("SO-8", "10.00")
    refunds = durable_kit.stand_in("shop-refunds")
    run = refund_for(durable_kit, "SO-8", durable_kit.user("clerk", OPERATOR, team="refunds"))
    durable_kit.clock.move(days=1)
    assert run.advance().status == "WAITING_APPROVAL"
    durable_kit.clock.move(days=1)
    assert run.advance().status == "FAILED"
    assert refunds.calls == [] and run.ledger() == []
