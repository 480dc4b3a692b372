"""A supervisor that delegates a refund claim to a claims-agent child run and waits for it: the child's approval
request is one a person decides in the inbox, which names the supervisor as the child's parent. Registered in the
test process only (its runs advance in-process)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from durable import Workflow, register
from durable.engine.states import RunStatus
from durable.models import Run
from tests.durable.claims import REFUND_MESSAGE, advance


class Case(BaseModel):
    order_id: str
    outcome: Any = None


supervisor = register(Workflow(name="test-claims-supervisor", version=1, state=Case, input=Case))


@supervisor.step
def delegate(ctx: Any, state: Case) -> Case:
    claim = ctx.start_child("claims-agent", input={
        "order_id": state.order_id, "customer_message": REFUND_MESSAGE.format(order_id=state.order_id)},
        business_key=state.order_id)
    [state.outcome] = ctx.wait_children([claim])
    return state


def supervised_claim(order_id: str = "ORD-1001", case: str = "CASE-1") -> tuple[Run, Run]:
    """The supervisor parked on its child, and the child (claims-agent, current version) paused at its approval."""
    from durable import services

    parent, _ = services.start_run(workflow="test-claims-supervisor", input={"order_id": order_id}, business_key=case)
    parent = advance(parent)
    assert parent.status == RunStatus.WAITING, parent.error
    child = advance(Run.objects.get(parent_run=parent))
    assert child.status == RunStatus.WAITING_APPROVAL, child.error
    return parent, child
