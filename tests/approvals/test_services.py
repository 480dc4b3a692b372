"""Approvals on the demo claims-agent v2, advanced here against the sandbox (invariant 8, docs/invariants.md)."""
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from threading import Barrier

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalDecision, ApprovalRequest
from approvals.services import expire_due
from durable import services
from durable.engine.approvals import snapshot_hash
from durable.engine.states import RunStatus
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import JournalEntry, Run
from durable.store.checkpoints import state_at
from tests.approvals.flow import decide, waiting_claim
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db

APPROVE = "approvals.decide_approvalrequest"


def refunds(sandbox):
    return sandbox.state.list_refunds()


def approval_events(run):
    return [e["event"] for e in JournalEntry.objects.filter(run=run, kind="approval").values_list("detail", flat=True)]


# Asking


def test_the_approval_step_asks_once_and_releases_the_run(demo):
    run, request = waiting_claim()
    assert run.lease_owner is None and run.lease_expires_at is None and run.current_step == "approval"
    assert request.snapshot == {"order_id": "ORD-1001", "customer": "Ada Lovelace", "amount": "120.00",
                                "refunded_amount": "0.00", "currency": "EUR"}
    assert request.snapshot_hash == snapshot_hash(request.snapshot)
    assert request.approval_object == {"action": "refund", "target": "ORD-1001", "amount": "120.00",
                                       "currency": "EUR"}
    assert (request.workflow_name, request.workflow_version, request.step, request.kind) == (
        "claims-agent", 2, "approval", "refund")
    assert request.approvers_required == 1 and request.business_key == "ORD-1001"
    assert timedelta(days=2, hours=23) < request.expires_at - timezone.now() <= timedelta(days=3)
    assert approval_events(run) == ["asked"]
    assert refunds(demo) == []


def test_a_run_woken_without_a_decision_goes_back_to_waiting_on_the_same_request(demo):
    run, request = waiting_claim()
    Run.objects.filter(id=run.id).update(status=RunStatus.PENDING)  # a stray wake-up
    run = advance(run)
    assert run.status == RunStatus.WAITING_APPROVAL
    assert list(ApprovalRequest.objects.filter(run=run).values_list("id", flat=True)) == [request.id]


# Approving and rejecting


def test_an_approval_wakes_the_run_which_pays_exactly_what_was_approved(demo, ann, sent,
                                                                        django_capture_on_commit_callbacks):
    run, request = waiting_claim()
    with django_capture_on_commit_callbacks(execute=True):
        decided = decide(request, ann)
    run.refresh_from_db()
    assert decided.status == "APPROVED" and decided.decided_by == ann and run.status == RunStatus.PENDING
    assert run.id in sent
    audit = operator_actions().get(run=run)
    assert (audit.actor, audit.action, audit.status_before, audit.status_after, audit.source) == (
        ann, "approve", "PENDING", "APPROVED", "test")
    assert audit.detail["snapshot_hash"] == request.snapshot_hash
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert [(r["order_id"], r["amount"]) for r in refunds(demo)] == [("ORD-1001", "120.00")]
    assert run.output["refund_id"] and approval_events(run) == ["asked", "approved by ann", "approval_used"]


def test_a_rejection_needs_a_reason_and_ends_the_run_without_paying(demo, ann):
    run, request = waiting_claim()
    with pytest.raises(InvalidInput) as no_reason:
        decide(request, ann, "reject", reason="  ")
    assert "reason" in no_reason.value.errors
    assert not ApprovalDecision.objects.exists()
    decide(request, ann, "reject", reason="the customer already got a voucher")
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == "approval_rejected"
    assert "rejected by ann: the customer already got a voucher" in run.error["message"]
    assert refunds(demo) == []


def test_a_decision_on_another_snapshot_is_refused_and_writes_nothing(demo, ann):
    run, request = waiting_claim()
    with pytest.raises(Conflict) as stale:
        decide(request, ann, seen=snapshot_hash({**request.snapshot, "amount": "99.00"}))
    assert "snapshot" in str(stale.value)
    request.refresh_from_db()
    assert request.status == "PENDING" and not ApprovalDecision.objects.exists()
    assert not operator_actions().exists()


# Separation of duties


def test_the_user_who_started_the_run_cannot_approve_it(demo, ann):
    run, request = waiting_claim(starter=ann)
    with pytest.raises(Forbidden):
        decide(request, ann)
    request.refresh_from_db()
    assert request.status == "PENDING" and not ApprovalDecision.objects.exists()


def test_a_user_without_the_approver_permission_cannot_decide(demo):
    run, request = waiting_claim()
    with pytest.raises(Forbidden):
        decide(request, make_user("viewer", "approvals.view_approvalrequest"))
    assert not ApprovalDecision.objects.exists()


def test_a_refund_over_1000_needs_two_different_approvers(demo, ann, bob):
    run, request = waiting_claim("ORD-1002")  # 1450.00 EUR
    assert request.approvers_required == 2
    assert decide(request, ann).status == "PENDING"
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING_APPROVAL  # one approval is not enough to act
    with pytest.raises(Conflict) as again:
        decide(request, ann)
    assert "2 different approvers" in str(again.value)
    assert decide(request, bob).status == "APPROVED"
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert sorted(state_at(run.id, run.checkpoints.last().seq)["approval"]["approved_by"]) == ["ann", "bob"]
    assert [r["amount"] for r in refunds(demo)] == ["1450.00"]


def test_a_second_decision_is_told_who_decided_first(demo, ann, bob):
    run, request = waiting_claim()
    decide(request, ann)
    with pytest.raises(Conflict) as late:
        decide(request, bob, "reject", reason="too late")
    assert "already approved by ann" in str(late.value) and late.value.current == "APPROVED"
    assert ApprovalDecision.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_decisions_yield_exactly_one(demo):
    approvers = [make_user(f"approver{i}", APPROVE) for i in range(4)]
    run, request = waiting_claim()
    start = Barrier(len(approvers))

    def one(user):
        start.wait()
        try:
            return decide(request, user, "approve" if user.username != "approver0" else "reject",
                          reason="concurrent").status
        except Conflict as exc:
            return f"conflict: {exc}"
        finally:
            connection.close()

    with ThreadPoolExecutor(len(approvers)) as pool:
        outcomes = list(pool.map(one, approvers))
    decided = [o for o in outcomes if not o.startswith("conflict")]
    assert len(decided) == 1, outcomes
    assert ApprovalDecision.objects.count() == 1 and operator_actions().count() == 1
    request.refresh_from_db()
    assert request.status == decided[0]


# Revalidation: at decision time, and again right before the run acts


@pytest.mark.parametrize("change, problem", [
    ({"refunded_amount": "120.00"}, "already been refunded"),
    ({"amount": "150.00"}, "amount changed from 120.00 to 150.00"),
    ({"currency": "USD"}, "currency changed"),
])
def test_a_decision_on_facts_that_moved_invalidates_instead_of_approving(demo, ann, change, problem):
    run, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", **change})
    with pytest.raises(Conflict) as moved:
        decide(request, ann)
    assert problem in str(moved.value) and moved.value.current == "INVALIDATED"
    assert moved.value.extra["current_values"]["order_id"] == "ORD-1001"
    request.refresh_from_db()
    run.refresh_from_db()
    assert request.status == "INVALIDATED" and problem in request.reason
    assert run.status == RunStatus.PENDING  # woken to take its declared path
    assert not ApprovalDecision.objects.exists()
    assert operator_actions().get(run=run).action == "invalidate_approval"


def test_after_an_invalidation_the_run_asks_again_with_the_fresh_snapshot(demo, ann):
    run, first = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})
    with pytest.raises(Conflict):
        decide(first, ann)
    run = advance(run)
    second = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert run.status == RunStatus.WAITING_APPROVAL and second.ask == 2
    assert second.snapshot["amount"] == "150.00" and second.approval_object["amount"] == "150.00"
    with pytest.raises(Conflict) as old:  # the old page: refused, pointing at the newer request
        decide(first, ann)
    assert old.value.extra["newer_request"]["id"] == str(second.id)
    decide(second, ann)
    assert advance(run).status == RunStatus.SUCCEEDED
    assert [r["amount"] for r in refunds(demo)] == ["150.00"]


def test_an_order_refunded_by_hand_after_approval_is_not_refunded_again(demo, ann):
    run, request = waiting_claim()
    decide(request, ann)
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})  # someone refunded it by hand
    run = advance(run)
    request.refresh_from_db()
    assert request.status == "INVALIDATED" and "already been refunded" in request.reason
    assert run.status == RunStatus.FAILED and run.error["kind"] == "precondition_failed"
    assert refunds(demo) == [] and demo.state.calls_snapshot()["payments"]["calls"] == 0
    assert approval_events(run)[-2:] == ["invalidated before acting", "precondition failed"]  # asked again: refused


def test_an_amount_changed_after_approval_is_asked_again_before_paying(demo, ann):
    run, request = waiting_claim()
    decide(request, ann)
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "80.00"})
    run = advance(run)
    assert run.status == RunStatus.WAITING_APPROVAL and refunds(demo) == []
    fresh = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert fresh.ask == 2 and fresh.approval_object["amount"] == "80.00"


# Expiry and cancellation


def test_an_expired_request_is_expired_by_the_sweeper_and_the_run_takes_its_expiry_path(demo, ann):
    run, request = waiting_claim()
    assert expire_due() == []
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_due() == [request.id]
    request.refresh_from_db()
    assert request.status == "EXPIRED"
    with pytest.raises(Conflict) as late:
        decide(request, ann)
    assert "expired" in str(late.value)
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == "approval_expired"  # claims-agent: on_expiry=fail
    assert refunds(demo) == []


def test_cancelling_a_waiting_run_closes_its_request(demo, ann):
    run, request = waiting_claim()
    services.cancel_run(run_id=run.id, user=None, source="test")
    request.refresh_from_db()
    assert request.status == "INVALIDATED" and request.reason == "the run was cancelled"
    with pytest.raises(Conflict):
        decide(request, ann)
