"""support-agent's whole story, driven by the public kit in this process: a loop, lookups made at once, a question
and the customer's reply (awaited with a deadline), a fraud-check child run, a refund two people approve, emails,
a three-day sleep. The clock is moved, never waited for; a worker is killed at each of the waits' fault points."""
from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from durable.conf import durable_settings
from durable.testing import WAIT_FAULT_POINTS, DurableKit, StandIn, TestRun
from durable.tools.demo import downstreams

ASKS_WITHOUT_A_REASON = {"order_id": "ORD-1002", "customer_message": "Please refund my order ORD-1002."}
TOOLS = ["lookup_order", "past_tickets", "ask_customer", "propose_refund", "send_email", "follow_up"]


@pytest.fixture
def desk(durable_kit: DurableKit, sandbox) -> tuple[DurableKit, StandIn, StandIn]:
    """The kit with the demo's payments and notifications stood in for; orders are read from the sandbox."""
    payments = durable_kit.stand_in(downstreams.payments,
                                    answer=lambda key, bk, payload: {**payload, "refund_id": "RF-1", "status": "done"})
    emails = durable_kit.stand_in(downstreams.notifications, answer=lambda key, bk, payload: {"status": "sent"})
    return durable_kit, payments, emails


def asked_for_a_reason(kit: DurableKit) -> TestRun:
    run = kit.start("support-agent", ASKS_WITHOUT_A_REASON, business_key="ORD-1002").advance()
    assert run.status == "WAITING" and run.waiting_for["events"] == ["customer_reply"]
    return run


def tell_the_story(kit: DurableKit, recover: Callable[[TestRun], object] = lambda run: None) -> TestRun:
    """From the start to the answer; `recover(run)` after each advance takes up a run whose worker was killed."""
    ann, bob = kit.user("ann", "approver"), kit.user("bob", "approver")
    run = asked_for_a_reason(kit)
    run.send_event("customer_reply", {"text": "I was charged twice."})
    recover(run.advance())
    [child] = run.children()  # the refund of 1,450.00 EUR was scored by a fraud-check child run first
    assert (child.status, child.output["risk"]) == ("SUCCEEDED", "low")
    assert run.status == "WAITING_APPROVAL"
    run.approve(ann)
    assert run.advance().status == "WAITING_APPROVAL"  # one of the two approvers it needs
    run.approve(bob)
    recover(run.advance())
    assert run.status == "WAITING" and run.waiting_for["kind"] == "timer"  # the follow-up, three days away
    kit.clock.move(days=2)
    assert run.advance().status == "WAITING"
    kit.clock.move(days=1)
    recover(run.advance())
    return run


def test_the_whole_story_runs_to_its_answer_with_every_action_done_once(desk):
    kit, payments, emails = desk
    began = time.perf_counter()
    run = tell_the_story(kit)
    took = time.perf_counter() - began  # measured, never asserted: docs/testing.md quotes it
    assert run.status == "SUCCEEDED", run.error
    assert run.output["tools_called"] == TOOLS
    assert payments.effects == 1 and emails.effects == 3  # the question, the refund's email, the follow-up
    assert payments.duplicates() == emails.duplicates() == []
    assert [row.action_name for row in run.ledger()] == ["email", "refund", "email", "email"]
    print(f"support-agent's story took {took:.3f} s")


@pytest.mark.parametrize("point", WAIT_FAULT_POINTS)
def test_a_worker_killed_at_a_wait_of_the_story_loses_and_repeats_nothing(desk, point):
    kit, payments, emails = desk
    crash = kit.crash_at(point)

    def recover(run: TestRun) -> None:
        # The killed worker's lease runs out at once; a parent whose child ended just before the kill is woken by
        # the sweeper a grace period later (durable.runtime.wakes.child_ends).
        kit.clock.move(seconds=durable_settings.DURABLE_PENDING_GRACE_SECONDS)
        run.advance()

    run = tell_the_story(kit, recover)
    assert crash.fired and run.status == "SUCCEEDED", run.error
    assert run.output["tools_called"] == TOOLS
    assert (payments.effects, emails.effects) == (1, 3)
    assert payments.duplicates() == emails.duplicates() == []


def test_a_customer_who_never_replies_is_told_the_request_was_closed_two_days_later(desk):
    kit, payments, emails = desk
    run = asked_for_a_reason(kit)
    kit.clock.move(days=1)
    assert run.advance().status == "WAITING"
    kit.clock.move(days=1)
    assert run.advance().status == "SUCCEEDED"
    assert "did not hear back" in run.output["answer"]
    assert payments.calls == [] and emails.effects == 1  # only the question


def test_a_refund_nobody_approves_within_three_days_fails_and_refunds_nothing(desk):
    kit, payments, _ = desk
    run = asked_for_a_reason(kit)
    run.send_event("customer_reply", {"text": "I was charged twice."})
    assert run.advance().status == "WAITING_APPROVAL"
    kit.clock.move(days=3)
    assert run.advance().status == "FAILED"
    assert [request.status for request in run.approvals()] == ["EXPIRED"] and payments.calls == []
