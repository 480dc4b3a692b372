"""Workflows for the visit tests: loops that ask again, parallel calls, calls from threads, approvals per visit,
side effects asked for again in a loop, a parallel group of side effects no key and no lookup can settle.
Registered in the test process and in worker processes."""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable import OperationConflict, RetryableError, RetryPolicy, Workflow, register
from durable.downstream import DownstreamOutcome, get_downstream, register_downstream
from durable.engine.approvals import Revalidation
from durable.engine.errors import Classification, classify
from durable.engine.ledger import Capabilities
from tests.durable.ledger_workflows import probe  # noqa: F401  registers the probe downstream
from tests.durable.workflows import calls_in, record_call

FAST_RETRY = RetryPolicy(max_attempts=3, initial_interval=0.01, max_interval=0.05)


class LoopInput(BaseModel):
    calls_file: str
    rounds: int = 3
    amounts: list[str] = []  # side-effect loop: the amount the "model" asks to refund at each visit
    catch_conflicts: bool = True  # side-effect loop: tell the model of an OperationConflict, or let it fail the run


class LoopState(LoopInput):
    visits: list[list[int]] = []  # [ctx.visit, ctx.visit_number] of each visit of the looping step
    answers: list[Any] = []
    told: list[str] = []  # what a caught OperationConflict said (as a tool's answer to the model)


# -- A loop that asks the model at every visit ------------------------------------------------------------------

visit_loop = register(Workflow(name="test-visit-loop", version=1, state=LoopState, input=LoopInput,
                               retry=FAST_RETRY))


@visit_loop.step(next=["act", "done"])
def act(ctx: Any, state: LoopState) -> Any:
    state.visits.append([ctx.visit, ctx.visit_number])
    state.answers.append(ctx.activity("ask", record_call, state.calls_file, f"ask-{len(state.visits)}"))
    return visit_loop.goto("act" if len(state.visits) < state.rounds else "done", state)


@visit_loop.step
def done(ctx: Any, state: LoopState) -> LoopState:
    return state


# -- The same refund asked for at each visit of a loop -----------------------------------------------------------

refund_loop = register(Workflow(name="test-refund-loop", version=1, state=LoopState, input=LoopInput,
                                retry=FAST_RETRY))


@refund_loop.step(next=["pay", "paid"], side_effects=["refund"])
def pay(ctx: Any, state: LoopState) -> Any:
    amount = state.amounts[len(state.answers)]
    try:
        state.answers.append(ctx.side_effect("refund", business_key="ORD-7", downstream=get_downstream("probe"),
                                             payload={"amount": amount}))
    except OperationConflict as refused:  # told to the model as the tool's answer, the run goes on
        if not state.catch_conflicts:
            raise
        state.answers.append(None)
        state.told.append(str(refused))
    return refund_loop.goto("pay" if len(state.answers) < len(state.amounts) else "paid", state)


@refund_loop.step
def paid(ctx: Any, state: LoopState) -> LoopState:
    return state


# -- Parallel calls ----------------------------------------------------------------------------------------------

class ParallelInput(BaseModel):
    calls_file: str
    delays: list[float] = [0.0, 0.0, 0.0]  # seconds each call takes
    fail_first: dict[str, str] = {}  # call name -> "retryable" or "final": fails its first live call that way
    effect: bool = False  # one more call: a side effect on the probe
    from_thread: bool = False  # call ctx.activity from a thread of the step's own


class ParallelState(ParallelInput):
    results: list[Any] = []
    refused: str = ""


def timed_call(calls_file: str, name: str, delay: float, fail: str) -> str:
    """A call that takes `delay` seconds, each start counted in `calls_file`; it may fail its first time."""
    failed_before = f"{name}-failed" in calls_in(calls_file)
    record_call(calls_file, name)
    time.sleep(delay)
    if fail and not failed_before:
        record_call(calls_file, f"{name}-failed")
        if fail == "retryable":
            raise RetryableError(f"{name} is briefly unavailable")
        raise ValueError(f"{name} cannot answer that")
    return f"{name}-result"


parallel_calls = register(Workflow(name="test-parallel", version=1, state=ParallelState, input=ParallelInput,
                                   retry=FAST_RETRY))


@parallel_calls.step(side_effects=["charge"])
def gather(ctx: Any, state: ParallelState) -> ParallelState:
    if state.from_thread:
        state.refused = _refusal_from_a_thread(ctx, state.calls_file)
        return state
    calls = [ctx.call(f"c{i}", timed_call, state.calls_file, f"c{i}", delay, state.fail_first.get(f"c{i}", ""))
             for i, delay in enumerate(state.delays)]
    if state.effect:
        calls.append(ctx.effect("charge", business_key="B-9", downstream=get_downstream("probe"),
                                payload={"amount": "3.00"}))
    state.results = ctx.parallel(*calls)
    return state


def _refusal_from_a_thread(ctx: Any, calls_file: str) -> str:
    refusals: list[str] = []

    def call_from_thread() -> None:
        try:
            ctx.activity("lookup", record_call, calls_file, "lookup")
        except Exception as exc:  # the refusal is the point: kept to be checked
            refusals.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=call_from_thread, name="tool-thread")
    thread.start()
    thread.join()
    return refusals[0] if refusals else ""


# -- Approvals: two in one step, and one per visit of a loop; one that the run acts on ---------------------------

class ApprovalInput(BaseModel):
    order: str = "ORD-5"
    rounds: int = 2


class ApprovalState(ApprovalInput):
    approved: list[str] = []  # the approved requests' ids, in the order the step got them
    refund: dict[str, Any] | None = None


def still_holds(snapshot: dict[str, Any]) -> Revalidation:
    return Revalidation(current=dict(snapshot))


def refund_still_due(snapshot: dict[str, Any]) -> Revalidation:
    """The order is refunded once the probe was asked for it: then an approval to refund no longer holds."""
    done = any(key == snapshot["order"] for _, key, _ in probe.calls)
    return Revalidation(current={**snapshot, "refunded": done},
                        problems=("the order has been refunded already",) if done else ())


def _ask(ctx: Any, kind: str, snapshot: dict[str, Any], revalidate: Any = still_holds) -> dict[str, Any]:
    return ctx.request_approval(kind, snapshot=snapshot, approve={"action": kind, **snapshot},
                                revalidate=revalidate, expires_in=timedelta(hours=1), on_invalid="fail")


two_approvals = register(Workflow(name="test-two-approvals", version=1, state=ApprovalState, input=ApprovalInput))


@two_approvals.step
def review(ctx: Any, state: ApprovalState) -> ApprovalState:
    state.approved = [_ask(ctx, "refund", {"order": state.order})["request"],
                      _ask(ctx, "goodwill", {"order": state.order, "voucher": "10.00"})["request"]]
    return state


approval_loop = register(Workflow(name="test-approval-loop", version=1, state=ApprovalState, input=ApprovalInput))


@approval_loop.step(next=["ask_each_time", "finish_asking"])
def ask_each_time(ctx: Any, state: ApprovalState) -> Any:
    state.approved.append(_ask(ctx, "refund", {"order": state.order, "round": len(state.approved) + 1})["request"])
    return approval_loop.goto("ask_each_time" if len(state.approved) < state.rounds else "finish_asking", state)


@approval_loop.step
def finish_asking(ctx: Any, state: ApprovalState) -> ApprovalState:
    return state


approve_then_refund = register(Workflow(name="test-approve-then-refund", version=1, state=ApprovalState,
                                        input=ApprovalInput, retry=FAST_RETRY))


@approve_then_refund.step(side_effects=["refund"])
def refund_when_approved(ctx: Any, state: ApprovalState) -> ApprovalState:
    state.approved = [_ask(ctx, "refund", {"order": state.order}, refund_still_due)["request"]]
    state.refund = ctx.side_effect("refund", business_key=state.order, downstream=get_downstream("probe"),
                                   payload={"amount": "25.00"})
    return state


def started_calls(calls_file: str | Path) -> list[str]:
    """The calls that started, without the failure marks."""
    return [line for line in calls_in(calls_file) if not line.endswith("-failed")]


# -- A parallel group of side effects against a downstream no key and no lookup can settle -----------------------

class BlindNotices:
    """A downstream that takes no Idempotency-Key and cannot be looked up; every request it is sent is written to
    the calls file the payload names (whichever process sent it)."""

    name = "blind-notices"
    capabilities = Capabilities(honours_idempotency_keys=False, can_lookup=False)
    client_retries = 0

    def classify(self, exc: BaseException) -> Classification:
        return classify(exc)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        record_call(payload["calls_file"], business_key)
        return DownstreamOutcome(f"notice-{business_key}", {"sent": business_key})

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("it cannot be looked up")


blind_notices = register_downstream(BlindNotices())
NOTICES = 4


class NoticesInput(BaseModel):
    calls_file: str


class NoticesState(NoticesInput):
    results: list[Any] = []


four_notices = register(Workflow(name="test-four-notices", version=1, state=NoticesState, input=NoticesInput))


@four_notices.step(side_effects=["notice"])
def tell_everyone(ctx: Any, state: NoticesState) -> NoticesState:
    state.results = ctx.parallel(*(ctx.effect("notice", business_key=f"N-{n}", downstream=blind_notices,
                                              payload={"n": n, "calls_file": state.calls_file})
                                   for n in range(NOTICES)))
    return state
