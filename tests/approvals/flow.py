"""Helpers: a claims-agent v2 run advanced in this process up to its approval, and decisions on it."""
from __future__ import annotations

from approvals import services
from approvals.models import ApprovalRequest
from durable.engine.states import RunStatus
from durable.models import Run
from tests.durable.claims import advance, start_claim


def waiting_claim(order_id: str = "ORD-1001", starter=None) -> tuple[Run, ApprovalRequest]:
    """A v2 claims run paused at its approval step, and the request it made."""
    run = start_claim(order_id, version=2, enqueue=False)  # advanced here: no worker may race this process for it
    if starter is not None:
        Run.objects.filter(id=run.id).update(created_by=starter)
    run = advance(run)
    assert run.status == RunStatus.WAITING_APPROVAL, run.error
    return run, ApprovalRequest.objects.get(run=run, status="PENDING")


def decide(request: ApprovalRequest, user, verdict: str = "approve", reason: str = "", seen: str | None = None):
    return services.decide(request_id=request.id, user=user, verdict=verdict, reason=reason, source="test",
                           snapshot_hash=seen if seen is not None else request.snapshot_hash)


def start_v2_claim(order_id: str = "ORD-1001") -> Run:
    """A v2 claims run handed to the broker, for a real worker to take to its approval."""
    from durable import services

    run, _ = services.start_run(workflow="claims-agent", business_key=order_id, input={
        "order_id": order_id, "customer_message": f"{order_id} arrived broken, refund please"})
    assert run.workflow_version == 2
    return run


def pending_request(run: Run) -> ApprovalRequest:
    """Wait until a worker has paused `run` at its approval; its open request."""
    from tests.waiting import status_of, wait_for

    wait_for(lambda: status_of(run.id) == RunStatus.WAITING_APPROVAL, what="the run to wait for approval")
    return ApprovalRequest.objects.get(run=run, status="PENDING")
