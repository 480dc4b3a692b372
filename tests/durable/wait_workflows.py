"""Workflows for the wait tests: a timer between two calls, a step that waits for events (several, with a
deadline), a parent that delegates to child runs. Registered in the test process and in worker processes."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable import ChildRunFailed, OnActiveBusinessKey, RetryPolicy, Workflow, register
from tests.durable.workflows import record_call

FAST_RETRY = RetryPolicy(max_attempts=3, initial_interval=0.01, max_interval=0.05)


class WaitInput(BaseModel):
    calls_file: str
    seconds: float = 60.0  # the timer, or the event wait's deadline (0: none)
    events: int = 1  # how many events the step waits for, one after another
    names: list[str] = ["reply"]
    children: int = 1
    child_fails: bool = False
    child_waits: bool = False  # the child waits for an event "go" before it ends
    catch_child_failure: bool = False


class WaitState(WaitInput):
    received: list[Any] = []  # each wait's event (name, payload) or "timeout"
    outputs: list[Any] = []
    child_error: str = ""


# -- A timer between two calls -----------------------------------------------------------------------------------

sleeper = register(Workflow(name="test-sleep", version=1, state=WaitState, input=WaitInput, retry=FAST_RETRY))


@sleeper.step
def remind(ctx: Any, state: WaitState) -> WaitState:
    ctx.activity("before", record_call, state.calls_file, "before")
    ctx.sleep(timedelta(seconds=state.seconds))
    ctx.activity("after", record_call, state.calls_file, "after")
    return state


# -- Waiting for events ------------------------------------------------------------------------------------------

class Reply(BaseModel):
    text: str
    rating: int = 0


listener = register(Workflow(name="test-wait-event", version=1, state=WaitState, input=WaitInput, retry=FAST_RETRY,
                             events={"rated": Reply, **dict.fromkeys(["reply", "approved", "declined", "other", "unrelated"])},
                             on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@listener.step
def listen(ctx: Any, state: WaitState) -> WaitState:
    ctx.activity("before", record_call, state.calls_file, "before")
    timeout = timedelta(seconds=state.seconds) if state.seconds else None
    for _ in range(state.events):
        event = ctx.wait_for_event(state.names, timeout=timeout)
        state.received.append("timeout" if event is None else [event.name, event.payload])
    return state


# -- Child runs --------------------------------------------------------------------------------------------------

class ChildInput(BaseModel):
    value: int
    fails: bool = False
    waits: bool = False


class ChildState(ChildInput):
    pass


child = register(Workflow(name="test-child", version=1, state=ChildState, input=ChildInput, retry=FAST_RETRY))


@child.step
def work(ctx: Any, state: ChildState) -> ChildState:
    if state.waits:
        ctx.wait_for_event("go")
    if state.fails:
        from durable import NonRetryableError

        raise NonRetryableError(f"child {state.value} refuses", kind="business_rejection")
    return state


@child.output
def child_output(state: ChildState) -> dict[str, int]:
    return {"doubled": state.value * 2}


parent = register(Workflow(name="test-parent", version=1, state=WaitState, input=WaitInput, retry=FAST_RETRY))


@parent.step
def delegate(ctx: Any, state: WaitState) -> WaitState:
    ctx.activity("before", record_call, state.calls_file, "before")
    started = [ctx.start_child("test-child", input={"value": n, "fails": state.child_fails, "waits": state.child_waits},
                               business_key=f"child-{n}") for n in range(state.children)]
    try:
        state.outputs = ctx.wait_children(started)
    except ChildRunFailed as exc:
        if not state.catch_child_failure:
            raise
        state.child_error = f"{exc.status}: {exc}"
    return state
