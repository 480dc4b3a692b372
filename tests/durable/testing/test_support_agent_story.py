"""support-agent's whole story, driven by the public kit in this process: a loop, lookups made at once, a question
and the customer's reply (awaited with a deadline), a fraud-check child run, a refund two people approve, emails,
a three-day sleep. The clock is moved, never waited for."""
from __future__ import annotations

import time

import pytest

from durable.testing import DurableKit
from durable.tools.demo import downstreams

REFUND_ANSWER = {"refund_id": "RF-1", "status": "refunded"}


@pytest.fixture
def desk(durable_kit: DurableKit, sandbox):
    """The kit with the demo's payments and notifications stood in for; orders are read from the sandbox."""
    payments = durable_kit.stand_in(downstreams.payments, answer=lambda key, bk, payload: {**payload, **REFUND_ANSWER})
    emails = durable_kit.stand_in(downstreams.notifications, answer=lambda key, bk, payload: {"status": "sent", **payload})
    return durable_kit, payments, emails


def test_the_whole_story_runs_to_its_answer_with_every_action_done_once(desk):
    kit, payments, emails = desk
    ann, bob = kit.user("ann", "approver"), kit.user("bob", "approver")
    began = time.perf_counter()
    run = kit.start("support-agent", {"order_id": "ORD-1002", "customer_message": "Please refund my order ORD-1002."},
                    business_key="ORD-1002").advance()
    assert run.status == "WAITING" and run.waiting_for["events"] == ["customer_reply"]
    run.send_event("customer_reply", {"text": "I was charged twice."})
    run.advance()
    # The fraud check ran as a child and ended; the refund of 1,450.00 EUR needs two approvers.
    [child] = run.children()
    assert (child.status, child.output["risk"]) == ("SUCCEEDED", "low")
    assert run.status == "WAITING_APPROVAL"
    run.approve(ann)
    assert run.advance().status == "WAITING_APPROVAL"  # one of two
    run.approve(bob)
    run.advance()
    assert run.status == "WAITING" and run.waiting_for["kind"] == "timer"  # the follow-up, three days away
    kit.clock.move(days=2)
    assert run.advance().status == "WAITING"
    kit.clock.move(days=1)
    run.advance()
    took = time.perf_counter() - began
    assert run.status == "SUCCEEDED", run.error
    assert run.output["tools_called"] == ["lookup_order", "past_tickets", "ask_customer", "propose_refund",
                                          "send_email", "follow_up"]
    assert payments.effects == 1 and payments.duplicates() == [] and emails.duplicates() == []
    assert emails.effects == 3  # the question, the refund's email, the follow-up
    assert [row.action_name for row in run.ledger()] == ["email", "refund", "email", "email"]
    print(f"the story took {took:.3f} s")
