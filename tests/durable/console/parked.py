"""Runs parked by real workflows for the console's tests (advanced in this process), and a workflow whose step
waits for an event at each visit of a loop, so the waits of its second visit are named by visit ("ask #2")."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from durable import Workflow, register, services
from durable.engine.states import RunStatus
from durable.models import Run
from tests.durable.claims import advance
from tests.durable.wait_workflows import FAST_RETRY, WaitInput, WaitState

wait_loop = register(Workflow(name="test-console-wait-loop", version=1, state=WaitState, input=WaitInput,
                              retry=FAST_RETRY))


@wait_loop.step(next=["ask", "done"])
def ask(ctx: Any, state: WaitState) -> Any:
    event = ctx.wait_for_event("answer")
    state.received.append(event.payload)
    return wait_loop.goto("ask" if len(state.received) < state.events else "done", state)


@wait_loop.step
def done(ctx: Any, state: WaitState) -> WaitState:
    return state


def start(workflow: str, tmp_path: Any, key: str = "W-1", **given: Any) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(tmp_path / "calls"), **given},
                                business_key=key)
    return run


def parked(workflow: str, tmp_path: Any, key: str = "W-1", **given: Any) -> Run:
    """A run of a wait test workflow (tests/durable/wait_workflows.py) advanced until it parks WAITING."""
    run = advance(start(workflow, tmp_path, key, **given))
    assert run.status == RunStatus.WAITING, run.error
    return run


def make_due(run: Run) -> None:
    """The database's clock passes the run's due time (its wait keeps its own copy of it)."""
    past = timezone.now() - timedelta(seconds=1)
    Run.objects.filter(id=run.id).update(next_attempt_at=past, waiting_for={**run.waiting_for, "until": past.isoformat()})
