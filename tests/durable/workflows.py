"""Workflows used by the tests, registered in the test process and in worker processes."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable import NonRetryableError, OnActiveBusinessKey, RetryableError, RetryPolicy, Workflow, register


class CountingInput(BaseModel):
    calls_file: str  # each live activity call appends a line here, across processes
    steps: int = 3
    hold_file: str = ""  # while this file exists, step `s2` waits after its activity
    fail_times: int = 0  # `s2` raises a retryable error this many times
    fail_kind: str = "retryable"


class CountingState(CountingInput):
    values: list[str] = []


def record_call(calls_file: str, name: str) -> str:
    with open(calls_file, "a") as calls:
        calls.write(f"{name}\n")
    return f"{name}-result"


def calls_in(path: str | Path) -> list[str]:
    path = Path(path)
    return path.read_text().splitlines() if path.exists() else []


counting = register(Workflow(
    name="test-counting", version=1, state=CountingState, input=CountingInput,
    retry=RetryPolicy(max_attempts=3, initial_interval=0.05, max_interval=0.2, jitter=0.1),
    prompt_release="p1",
    on_active_business_key=OnActiveBusinessKey.START_ANOTHER,  # tests start many runs under one key
))


@counting.step
def s1(ctx: Any, state: CountingState) -> CountingState:
    state.values.append(ctx.activity("a1", record_call, state.calls_file, "a1"))
    return state


@counting.step
def s2(ctx: Any, state: CountingState) -> CountingState:
    state.values.append(ctx.activity("a2", record_call, state.calls_file, "a2"))
    deadline = time.monotonic() + 60
    while state.hold_file and os.path.exists(state.hold_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    failures = len([c for c in Path(state.calls_file).read_text().splitlines() if c.startswith("fail")])
    if failures < state.fail_times:
        record_call(state.calls_file, f"fail-{failures + 1}")
        if state.fail_kind == "retryable":
            raise RetryableError("downstream briefly unavailable")
        raise NonRetryableError("invalid parameters", kind="invalid_request")
    return state


@counting.step
def s3(ctx: Any, state: CountingState) -> CountingState:
    state.values.append(ctx.activity("a3", record_call, state.calls_file, "a3"))
    state.values.append(ctx.activity("a4", record_call, state.calls_file, "a4"))
    return state


class Empty(BaseModel):
    n: int = 0


def trivial_workflow(name: str, steps: int) -> Workflow:
    """A workflow of `steps` steps that each add one to a counter."""
    wf = Workflow(name=name, version=1, state=Empty, input=Empty,
                  on_active_business_key=OnActiveBusinessKey.START_ANOTHER)  # tests start many runs under one key
    for i in range(steps):
        def bump(ctx: Any, state: Empty) -> Empty:
            state.n += 1
            return state
        wf.step(bump, name=f"step{i + 1}")
    return register(wf)


trivial = trivial_workflow("test-trivial", 10)


class ComputeState(BaseModel):
    n: int = 0
    pause_at: int = 0  # the step (1..10) that asks its own run's pause, as an operator would meanwhile (in-process)


compute_then_pause = register(Workflow(name="test-compute-pause", version=1, state=ComputeState, input=ComputeState,
                                       on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


def _compute(ctx: Any, state: ComputeState) -> ComputeState:
    """A step that makes no call; the one numbered `pause_at` asks the run's pause."""
    from durable import pauses

    state.n += 1
    if state.n == state.pause_at:
        pauses.pause_run(run_id=ctx.run_id, user=None, source="command", reason="asked while it computed")
    return state


for _number in range(10):
    compute_then_pause.step(_compute, name=f"compute{_number + 1}")


class CustomerOrder(BaseModel):
    customer_email: str
    order_id: str
    note: str = ""  # not searchable


customer_order = register(Workflow(
    name="test-customer-order", version=1, state=CustomerOrder, input=CustomerOrder,
    searchable=("customer_email", "order_id"), on_active_business_key=OnActiveBusinessKey.START_ANOTHER,
))


@customer_order.step
def acknowledge(ctx: Any, state: CustomerOrder) -> CustomerOrder:
    return state


class SlowCallState(BaseModel):
    call: str  # "refund", "ticket", "notify" (a downstream of each kind) or "plan" (an LLM activity)
    order_id: str = "ORD-1001"
    result: dict[str, Any] = {}


slow_call = register(Workflow(
    name="test-slow-call", version=1, state=SlowCallState, input=SlowCallState, prompt_release="p1",
    retry=RetryPolicy(max_attempts=3, initial_interval=0.05, max_interval=0.2, jitter=0.1),
))


@slow_call.step(side_effects=["refund", "ticket", "notify"])
def make_the_call(ctx: Any, state: SlowCallState) -> SlowCallState:
    """One call to a downstream of the kind asked for, or to the planner's model, in a step of its own."""
    from durable.tools.demo import downstreams
    from durable.tools.demo.llm import planner_model

    order = state.order_id
    if state.call == "plan":
        state.result = ctx.activity("llm.plan", planner_model().plan, f"{order} arrived broken, refund please")
    elif state.call == "refund":
        state.result = ctx.side_effect("refund", business_key=order, downstream=downstreams.payments,
                                       payload={"order_id": order, "amount": "120.00"})
    elif state.call == "ticket":
        state.result = ctx.side_effect("ticket", business_key=order, downstream=downstreams.tickets,
                                       payload={"subject": f"Refund for {order}"})
    else:
        state.result = ctx.side_effect("notify", business_key=order, downstream=downstreams.notifications,
                                       payload={"to": "ada@example.com", "message": "Your refund is on its way"})
    return state


# Values the database cannot store, as an LLM's output or a downstream's body may hold them. A run's input
# cannot carry them (start_run refuses them), so it names one and the `poison` step puts it where told.
POISONS: dict[str, Any] = {"nul": "before\x00after", "surrogate": "an LLM wrote \ud800 here", "nan": float("nan")}


class PoisonInput(BaseModel):
    poison: str = "nul"  # a key of POISONS
    # Where the `poison` step puts it: state, output, activity, activity_name, payload, business_key, snapshot,
    # approve, retryable_error, bug.
    where: str = "state"


class PoisonState(PoisonInput):
    text: str = ""
    number: float = 0.0
    got: dict[str, Any] = {}


unstorable = register(Workflow(
    name="test-unstorable", version=1, state=PoisonState, input=PoisonInput,
    retry=RetryPolicy(max_attempts=2, initial_interval=0.01, max_interval=0.05, jitter=0.0),
    on_active_business_key=OnActiveBusinessKey.START_ANOTHER,
))


def still_holds(snapshot: dict[str, Any]) -> Any:
    from durable.engine.approvals import Revalidation

    return Revalidation(current=snapshot)


@unstorable.step
def prepare(ctx: Any, state: PoisonState) -> PoisonState:
    """A step that writes a clean checkpoint: where a run refused at the next step stays."""
    return state


@unstorable.step(side_effects=["charge"])
def poison(ctx: Any, state: PoisonState) -> PoisonState:
    from datetime import timedelta

    from durable.downstream import get_downstream

    value, where = POISONS[state.poison], state.where
    if where == "state":
        if isinstance(value, float):
            state.number = value
        else:
            state.text = value
    elif where == "activity":
        state.got = ctx.activity("llm.answer", lambda: {"answer": value})
    elif where == "activity_name":
        state.got = ctx.activity(f"tool:{value}", lambda: {"answer": "fine"})
    elif where in ("payload", "business_key"):
        state.got = ctx.side_effect("charge", business_key=value if where == "business_key" else "B-1",
                                    downstream=get_downstream("probe"),
                                    payload={"note": value} if where == "payload" else {"amount": "10.00"})
    elif where in ("snapshot", "approve"):
        state.got = ctx.request_approval(
            "refund", snapshot={"note": value if where == "snapshot" else "fine"},
            approve={"note": value if where == "approve" else "fine"}, revalidate=still_holds,
            expires_in=timedelta(days=1))
    elif where == "retryable_error":
        raise RetryableError(f"the downstream answered {value!s}")
    elif where == "bug":
        raise ValueError(value)
    return state


@unstorable.step
def conclude(ctx: Any, state: PoisonState) -> PoisonState:
    return state


@unstorable.output
def poison_output(state: PoisonState) -> dict[str, Any]:
    return {"value": POISONS[state.poison]} if state.where == "output" else {"got": state.got}


class InFlightState(BaseModel):
    calls_file: str  # each call appends "start <run> <name>" before it waits and "end <run> <name>" after
    seconds: float = 1.0  # how long each call takes: a model's answer, as a worker sees it
    calls: int = 2
    ticket: bool = False  # then a side effect after the calls: a ticket keyed by the run, opened once


slow_calls = register(Workflow(name="test-slow-calls", version=1, state=InFlightState, input=InFlightState))


def slow_call_of(calls_file: str, run_id: str, name: str, seconds: float) -> str:
    """A call that waits as a model call does (its thread blocked), each start and end counted in the file."""
    with open(calls_file, "a") as calls:  # one short append per line: whole lines, across threads and processes
        calls.write(f"start {run_id} {name}\n")
    time.sleep(seconds)
    with open(calls_file, "a") as calls:
        calls.write(f"end {run_id} {name}\n")
    return name


@slow_calls.step(side_effects=["ticket"])
def call_slowly(ctx: Any, state: InFlightState) -> InFlightState:
    from durable.tools.demo import downstreams

    for n in range(state.calls):
        ctx.activity(f"call{n}", slow_call_of, state.calls_file, str(ctx.run_id), f"call{n}", state.seconds)
    if state.ticket:
        ctx.side_effect("ticket", business_key=f"T-{ctx.run_id}", downstream=downstreams.tickets,
                        payload={"subject": "in flight"})
    return state


class PauseGapState(BaseModel):
    calls_file: str  # each call sent appends its name here, across processes
    hold_file: str = ""  # while this file exists, `think` (a step that makes no call) holds, once it touched .reached
    parallel: bool = False  # `ask` makes its calls as one ctx.parallel group
    pause_from_step: bool = False  # `think` asks its own run's pause, as an operator would meanwhile (in-process)
    answers: list[str] = []


pause_gap = register(Workflow(
    name="test-pause-gap", version=1, state=PauseGapState, input=PauseGapState,
    on_active_business_key=OnActiveBusinessKey.START_ANOTHER,
))


@pause_gap.step
def think(ctx: Any, state: PauseGapState) -> PauseGapState:
    """A step that makes no call: the boundary after it does not look whether a pause was asked."""
    from durable import pauses

    if state.hold_file:
        Path(f"{state.hold_file}.reached").touch()
        deadline = time.monotonic() + 60
        while os.path.exists(state.hold_file) and time.monotonic() < deadline:
            time.sleep(0.05)
    if state.pause_from_step:
        pauses.pause_run(run_id=ctx.run_id, user=None, source="command", reason="asked while it thought")
    return state


@pause_gap.step
def ask(ctx: Any, state: PauseGapState) -> PauseGapState:
    """A step whose first call is the first thing it does: a model's, a tool's."""
    if state.parallel:
        state.answers = ctx.parallel(ctx.call("a1", record_call, state.calls_file, "a1"),
                                     ctx.call("a2", record_call, state.calls_file, "a2"))
    else:
        state.answers = [ctx.activity("a1", record_call, state.calls_file, "a1")]
    return state
