"""Attacks on the approval boundary ("Trust"; invariants 8 and 10, docs/invariants.md), each as found."""
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals.models import ApprovalRequest
from durable.console.timeline import run_timeline
from durable.engine.approvals import approvers_needed
from durable.engine.states import RunStatus
from durable.errors import Conflict
from durable.models import Run, SecurityEvent
from tests.approvals.flow import decide, waiting_claim
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db

APPROVE = "approvals.decide_approvalrequest"


def refused_decisions() -> list[SecurityEvent]:
    return list(SecurityEvent.objects.filter(kind=SecurityEvent.Kind.DECISION_REFUSED).order_by("id"))


def past_deadline(request: ApprovalRequest) -> None:
    """The deadline passed and the sweeper has not run (beat paused, backlogged, between sweeps)."""
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))


# Four eyes when the amount moves (item 2)


def test_when_the_amount_moves_past_the_threshold_the_new_request_needs_two_approvers(demo, ann, bob):
    run, first = waiting_claim("ORD-1001")  # 120.00: one approver
    assert first.approvers_required == 1
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "5000.00"})
    with pytest.raises(Conflict):  # the stale approval is refused and the request invalidated
        decide(first, ann)
    run = advance(Run.objects.get(id=run.id))
    assert run.status == RunStatus.WAITING_APPROVAL
    second = ApprovalRequest.objects.get(run=run, status="PENDING")
    assert second.snapshot["amount"] == "5000.00" and second.approvers_required == 2
    assert decide(second, ann).status == "PENDING"  # one approver alone cannot pay 5,000.00
    assert demo.state.list_refunds() == []
    assert decide(second, bob).status == "APPROVED"


def test_a_decision_needs_the_approvers_the_revalidated_facts_call_for(demo, ann, bob, monkeypatch):
    """A workflow whose revalidation lets a bigger refund through still cannot pay it on one approval."""
    from approvals import services
    from durable.engine.approvals import Revalidation

    run, request = waiting_claim("ORD-1001")
    assert request.approvers_required == 1
    monkeypatch.setattr(services, "load_revalidation", lambda path: lambda snapshot: Revalidation(
        current={**snapshot, "amount": "5000.00"}, approvers_required=2))
    decided = decide(request, ann)
    assert (decided.status, decided.approvers_required, decided.approvals_count) == ("PENDING", 2, 1)
    assert decide(decided, bob).status == "APPROVED"


def test_approvers_needed_never_lowers_the_count_the_request_was_asked_with():
    assert approvers_needed(2, 1) == 2
    assert approvers_needed(1, None) == 1
    assert approvers_needed(1, 3) == 3


# A late approval (item 4)


def test_an_approval_after_the_deadline_is_refused_though_the_sweeper_has_not_run(demo, ann):
    run, request = waiting_claim()
    past_deadline(request)
    with pytest.raises(Conflict) as late:
        decide(request, ann)
    assert "expired" in str(late.value) and late.value.current == "EXPIRED"
    request.refresh_from_db()
    assert request.status == "EXPIRED" and request.decisions.count() == 0
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING  # woken to take its expiry path
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == "approval_expired"
    assert demo.state.list_refunds() == []


def test_the_deadline_is_judged_in_the_statement_that_records_the_decision(demo, ann, monkeypatch):
    """Expiry lands between the checks and the write: the conditional UPDATE itself refuses."""
    from approvals import services

    run, request = waiting_claim()
    real_record = services._record

    def record_after_the_deadline(request, *args):
        past_deadline(request)
        return real_record(request, *args)

    monkeypatch.setattr(services, "_record", record_after_the_deadline)
    with pytest.raises(Conflict) as late:
        decide(request, ann)
    assert late.value.current == "EXPIRED"
    request.refresh_from_db()
    assert request.status == "EXPIRED" and request.decisions.count() == 0 and request.approvals_count == 0


def test_a_late_approval_through_the_api_is_a_409_and_through_the_console_says_it_expired(demo, ann):
    from rest_framework.test import APIClient

    _, request = waiting_claim()
    past_deadline(request)
    api = APIClient()
    api.force_authenticate(ann)
    answer = api.post(f"/api/approvals/{request.id}/approve/", {"snapshot_hash": request.snapshot_hash}, format="json")
    assert answer.status_code == 409 and answer.data["current_status"] == "EXPIRED"
    _, other = waiting_claim("ORD-1003")
    past_deadline(other)
    console = Client()
    console.force_login(ann)
    page = console.post(f"/approvals/{other.id}/decide/", {"verdict": "approve", "snapshot_hash": other.snapshot_hash})
    assert page.status_code == 409 and "expired" in page.content.decode()
    assert ApprovalRequest.objects.get(id=other.id).status == "EXPIRED"


# Wording (item 18)


def test_the_timeline_says_approved_and_rejected_in_words(demo, ann, bob):
    run, request = waiting_claim()
    decide(request, ann, verdict="reject", reason="not covered")
    words = " ".join(event.summary for event in run_timeline(Run.objects.get(id=run.id)))
    assert "rejected by ann" in words and "rejectd" not in words
    run2, request2 = waiting_claim("ORD-1003")
    decide(request2, bob)
    assert "approved by bob" in " ".join(event.summary for event in run_timeline(Run.objects.get(id=run2.id)))


# Refused decisions leave a trace (item 10)


def test_each_refused_decision_is_written_to_the_security_log_once(demo, ann, bob):
    _, request = waiting_claim()
    with pytest.raises(Conflict):
        decide(request, ann, seen="0" * 64)  # a snapshot this request does not show
    decide(request, ann)
    with pytest.raises(Conflict):
        decide(request, bob)  # already decided
    _, late = waiting_claim("ORD-1003")
    past_deadline(late)
    with pytest.raises(Conflict):
        decide(late, bob)
    rows = refused_decisions()
    assert [(row.username, row.target) for row in rows] == [
        ("ann", str(request.id)), ("bob", str(request.id)), ("bob", str(late.id))]
    assert "expired" in rows[-1].reason and all(row.action == "approve" for row in rows)


def test_a_refused_decision_through_the_api_records_the_callers_address(demo, ann):
    from rest_framework.test import APIClient

    _, request = waiting_claim()
    api = APIClient(REMOTE_ADDR="203.0.113.5")
    api.force_authenticate(ann)
    assert api.post(f"/api/approvals/{request.id}/approve/", {"snapshot_hash": "0" * 64},
                    format="json").status_code == 409
    [row] = refused_decisions()
    assert (row.address, row.source) == ("203.0.113.5", "api")
