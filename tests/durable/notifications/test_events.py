"""The outbox: each event is a row written in the transaction of the state change that causes it, by the code
that makes the change (the run store, the ledger, approvals, the reconciliation sweeper), through one signal."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import expire_due, warn_expiring
from durable import services
from durable.engine.errors import LeaseLost
from durable.engine.ledger import OperationStatus as Op
from durable.engine.notifications import EventKind
from durable.engine.states import RunStatus
from durable.models import NotificationEvent, Run, SideEffect
from durable.runtime import executor
from durable.store import store
from durable.tools.faults import AFTER_STARTED
from reconciliation.sweeper import reconcile_stale
from tests.approvals.flow import waiting_claim
from tests.durable.claims import needs_attention, start_claim
from tests.durable.notifications.conftest import a_run
from tests.durable.runtime.test_side_effects import crash

pytestmark = pytest.mark.django_db


class Boom(Exception):
    """Whatever makes the transaction around a change roll back."""


def events(kind: EventKind | None = None) -> list[tuple[str, str]]:
    rows = NotificationEvent.objects.order_by("id")
    if kind is not None:
        rows = rows.filter(kind=kind)
    return list(rows.values_list("kind", "subject"))


def claimed():
    run = a_run()
    lease, _ = store().claim(run.id, "this-worker", 60)
    return run, lease


def test_a_run_that_fails_for_good_records_run_failed_with_its_error(calls_file):
    run, _ = services.start_run(workflow="test-counting", business_key="k",
                                input={"calls_file": calls_file, "fail_times": 1, "fail_kind": "final"})
    executor.advance(run.id)
    [event] = NotificationEvent.objects.all()
    assert (event.kind, event.subject, event.run_id) == (EventKind.RUN_FAILED, str(run.id), run.id)
    assert event.detail["step"] == "s2" and event.detail["kind"] == "invalid_request"
    assert event.fanned_out_at is None  # a worker fans it out after the commit


def test_a_failure_rolled_back_with_its_transaction_records_no_event():
    run, lease = claimed()
    with pytest.raises(Boom), transaction.atomic():
        store().fail(lease, "step1", 1, {"kind": "invalid_request", "message": "no"})
        raise Boom()
    assert Run.objects.get(id=run.id).status == RunStatus.RUNNING
    assert events() == []


def test_a_worker_that_lost_its_lease_records_no_event():
    run, lease = claimed()
    Run.objects.filter(id=run.id).update(fencing_token=lease.token + 1)  # another worker took it
    with pytest.raises(LeaseLost):
        store().fail(lease, "step1", 1, {"kind": "invalid_request", "message": "no"})
    assert events() == []


def test_the_same_failure_sent_twice_is_one_event():
    run, lease = claimed()
    store().needs_attention(lease, "step1", {"kind": "unknown_side_effect"})
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING)
    store().needs_attention(lease, "step1", {"kind": "unknown_side_effect"})  # same lease token: same occurrence
    assert events() == [(EventKind.RUN_NEEDS_ATTENTION, str(run.id))]


def test_an_unknown_operation_records_operation_unknown_and_run_needs_attention(demo):
    run, row = needs_attention(demo)
    assert events() == [(EventKind.OPERATION_UNKNOWN, row.operation_id), (EventKind.RUN_NEEDS_ATTENTION, str(run.id))]
    unknown = NotificationEvent.objects.get(kind=EventKind.OPERATION_UNKNOWN)
    assert unknown.detail["action"] == "notify" and unknown.detail["business_key"] == "ORD-1001"
    assert "no idempotency keys and no lookup" in unknown.detail["evidence"]


def test_the_reconciliation_sweeper_marking_an_operation_unknown_records_both_events(demo, monkeypatch, settings):
    settings.DURABLE_RECONCILE_AFTER_SECONDS = 0
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "notify")
    assert reconcile_stale() == 1
    row = SideEffect.objects.get(run=run, action_name="notify")
    assert row.status == Op.UNKNOWN
    assert events() == [(EventKind.OPERATION_UNKNOWN, row.operation_id), (EventKind.RUN_NEEDS_ATTENTION, str(run.id))]


def test_an_approval_request_records_approval_requested(demo):
    run, request = waiting_claim()
    [event] = NotificationEvent.objects.all()
    assert (event.kind, event.subject, event.run_id) == (EventKind.APPROVAL_REQUESTED, str(request.id), run.id)
    assert event.detail == {"approval": "refund", "business_key": "ORD-1001", "workflow": "claims-agent",
                            "expires_at": request.expires_at.isoformat(), "approvers_required": 1}


def test_an_expired_approval_records_approval_expired(demo):
    _, request = waiting_claim()
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_due() == [request.id]
    assert events(EventKind.APPROVAL_EXPIRED) == [(EventKind.APPROVAL_EXPIRED, str(request.id))]


def test_the_sweeper_warns_once_of_an_approval_within_the_lead_time(demo, settings):
    _, request = waiting_claim()  # expires in three days
    settings.DURABLE_NOTIFY_EXPIRY_WARNING_SECONDS = 3600
    assert warn_expiring() == 0
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() + timedelta(minutes=59))
    assert warn_expiring() == 1 and warn_expiring() == 1  # every sweep sees it in the hour...
    assert events(EventKind.APPROVAL_EXPIRING) == [(EventKind.APPROVAL_EXPIRING, str(request.id))]  # ...one event
