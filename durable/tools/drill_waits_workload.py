"""The fault drill's waits workload (durable/tools/drill_waits.py): a run that waits for events one after another,
and a parent that delegates to a child run and waits for its answer. Imported by the drill and by the workers it
starts (DURABLE_WORKFLOW_MODULES); no side effect, so a crash anywhere costs nothing but time."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable import Context, RetryPolicy, Workflow, register

EVENT = "drill-ping"  # the name of every event the drill sends
LISTENER, PARENT, CHILD = "drill-wait-event", "drill-parent", "drill-child"
# A crash is the drill's, not the step's: a retry would only hide a lost event or child behind a second try.
NO_RETRY = RetryPolicy(max_attempts=1)


def drill_workflow(name: str, state: type[BaseModel]) -> Workflow:
    """Version 1 of `name`, registered. No model, prompt or tool catalog: its releases are "none" (durable.W010)."""
    return register(Workflow(name=name, version=1, state=state, input=state, retry=NO_RETRY,
                             tool_catalog_version="none", prompt_release="none", model_policy_version="none"))


class Listening(BaseModel):
    expect: int = 1  # how many events the run waits for, one wait after another
    received: list[dict[str, Any]] = []  # each consumed event: its mailbox id and the sequence number sent


listener = drill_workflow(LISTENER, Listening)


@listener.step
def listen(ctx: Context, state: Listening) -> Listening:
    for _ in range(state.expect):
        event = ctx.wait_for_event(EVENT)
        assert event is not None  # no timeout: the wait returns only with an event
        state.received.append({"id": event.id, "seq": event.payload["seq"]})
    return state


@listener.output
def heard(state: Listening) -> dict[str, Any]:
    return {"received": state.received}


class Delegating(BaseModel):
    value: int = 1
    answer: dict[str, Any] | None = None


parent = drill_workflow(PARENT, Delegating)


@parent.step
def delegate(ctx: Context, state: Delegating) -> Delegating:
    child_run = ctx.start_child(CHILD, input={"value": state.value}, business_key=f"{ctx.business_key}/child")
    state.answer = ctx.wait_child(child_run)
    return state


@parent.step
def report(ctx: Context, state: Delegating) -> Delegating:  # a checkpoint after the wait, as a real parent goes on
    return state


@parent.output
def answered(state: Delegating) -> dict[str, Any] | None:
    return state.answer


child = drill_workflow(CHILD, Delegating)


@child.step
def work(ctx: Context, state: Delegating) -> Delegating:
    ctx.sleep(timedelta(milliseconds=300))  # the parent parks first; the child is woken by a timer
    return state


@child.output
def doubled(state: Delegating) -> dict[str, Any]:
    return {"doubled": state.value * 2}
