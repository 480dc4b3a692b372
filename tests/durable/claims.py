"""Helpers for tests that drive the demo claims-agent in this process against the sandbox."""
from __future__ import annotations

from django.utils import timezone

from durable import services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from durable.runtime import executor

REFUND_MESSAGE = "Hello, order {order_id} arrived broken. I would like a refund please."


def start_claim(order_id: str = "ORD-1001", message: str | None = None, version: int = 1,
                enqueue: bool = True) -> Run:
    """A claims run; version 1 by default, which runs to the end without asking anyone."""
    message = message or REFUND_MESSAGE.format(order_id=order_id)
    run, _ = services.start_run(workflow="claims-agent", input={"order_id": order_id, "customer_message": message},
                                business_key=order_id, version=version, allow_older_version=True, enqueue=enqueue)
    return run


def advance(run: Run) -> Run:
    executor.advance(run.id)
    run.refresh_from_db()
    return run


def make_retry_due(run: Run) -> None:
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())


def needs_attention(sandbox, fault: str = "drop_after_success", order_id: str = "ORD-1001") -> tuple[Run, SideEffect]:
    """A claims run whose customer notification is UNKNOWN: "drop_after_success" sent it and lost
    the answer; "hang" timed out without sending anything. Either way the machine cannot know."""
    sandbox.state.arm_fault("notifications", fault)
    run = advance(start_claim(order_id))
    assert run.status == RunStatus.NEEDS_ATTENTION
    return run, SideEffect.objects.get(run=run, action_name="notify", status=Op.UNKNOWN)
