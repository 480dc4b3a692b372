"""Approvals with real Celery workers: a paused run holds no worker, survives restarts, and resumes once decided."""
from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from durable.engine.states import RunStatus
from durable.models import Run
from durable.tools.processes import WorkerProcess
from tests.approvals.flow import decide, pending_request, start_v2_claim
from tests.conftest import make_user
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_an_approved_run_resumes_on_a_worker_and_refunds_once(session_worker, sandbox):
    run = start_v2_claim()
    request = pending_request(run)
    run.refresh_from_db()
    assert run.lease_owner is None  # waiting holds no worker
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the approved run to finish")
    assert [(r["order_id"], r["amount"]) for r in sandbox.state.list_refunds()] == [("ORD-1001", "120.00")]


def test_an_order_refunded_by_hand_after_approval_is_caught_by_the_worker_before_paying(
        own_queue, sandbox, worker_log_dir):
    with WorkerProcess(log_path=worker_log_dir / "approval-invalidated-a.log", name="invalidated-a"):
        run = start_v2_claim()
        request = pending_request(run)
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    sandbox.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})  # refunded by hand meanwhile
    with WorkerProcess(log_path=worker_log_dir / "approval-invalidated-b.log", name="invalidated-b"):
        wait_for(lambda: status_of(run.id) == RunStatus.FAILED, what="the run to refuse the stale approval")
    assert Run.objects.get(id=run.id).error["kind"] == "precondition_failed"
    assert ApprovalRequest.objects.get(id=request.id).status == "INVALIDATED"
    assert sandbox.state.list_refunds() == [] and sandbox.state.calls_snapshot()["payments"]["calls"] == 0


def test_a_waiting_run_survives_a_worker_restart_and_resumes_on_the_new_worker(own_queue, sandbox, worker_log_dir):
    with WorkerProcess(log_path=worker_log_dir / "approval-before-restart.log", name="before"):
        run = start_v2_claim("ORD-1003")
        request = pending_request(run)
    # No worker runs now: the decision's message waits in the broker, the run waits in the database.
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    assert status_of(run.id) == RunStatus.PENDING
    with WorkerProcess(log_path=worker_log_dir / "approval-after-restart.log", name="after"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the run to finish on the new worker")
    assert [r["amount"] for r in sandbox.state.list_refunds()] == ["35.50"]
    tokens = set(Run.objects.get(id=run.id).journal.values_list("fencing_token", flat=True)) - {0}
    assert len(tokens) >= 2  # the waiting run was claimed again by the new worker, under a newer token
