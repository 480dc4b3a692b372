"""The executor: advance one run under its lease, step after step, until it waits or ends."""
from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError

from durable import logs, metrics, tracing
from durable.conf import durable_settings
from durable.engine.contract import PINNABLE, Contract, Refusal, check_contract, upcast
from durable.engine.costs import BudgetExhausted
from durable.engine.errors import (
    AwaitingApproval,
    LeaseLost,
    NeedsAttention,
    PauseSeen,
    ReplayContractViolation,
    Waiting,
    classify,
    refuse_unstorable,
)
from durable.engine.replay import Mismatch, RecordedCall, ReplayCursor, ReplayMismatch
from durable.engine.state_delta import refuse_too_large
from durable.engine.topology import shapes_from_json
from durable.models import JournalEntry, Run
from durable.registry import UnknownWorkflow, registry
from durable.runtime import costs, heartbeat, pausing, side_effects, wakes
from durable.runtime.context import StepContext
from durable.runtime.visit import Visit
from durable.store import Lease, RunStore
from durable.store import store as backend_store
from durable.store.base import UNKNOWN_SIDE_EFFECT
from durable.workflow import Step, Workflow

log = logging.getLogger("durable.executor")  # the name operators filter on, kept across the move to runtime/


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class AdvanceOutcome:
    """What one call of `advance` did, for the task and for tests."""

    claimed: bool
    steps: int = 0
    requeue: bool = False
    retry_in: float | None = None


def advance(run_id: UUID | str, *, owner: str | None = None, store: RunStore | None = None) -> AdvanceOutcome:
    """Claim the run's lease and run its steps until it finishes, waits or its time slice ends.

    `store` is the backend's run store unless given (the benchmark passes one that times its calls).
    """
    store = store or backend_store()
    with logs.bound(run_id=str(run_id)):
        claimed = store.claim(run_id, owner or worker_id(), durable_settings.DURABLE_LEASE_SECONDS)
        if claimed is None:
            return AdvanceOutcome(claimed=False)
        lease, run = claimed
        with logs.bound(workflow=run.workflow_name, version=run.workflow_version), heartbeat.kept_alive(store, lease):
            return _advance_claimed(store, lease, run)


@tracing.advancing
def _advance_claimed(store: RunStore, lease: Lease, run: Run) -> AdvanceOutcome:
    if lease.resuming:
        metrics.run_resumed(run.workflow_name, run.workflow_version, lease.waited_seconds)
    try:
        if run.pause_requested_at is not None:  # asked while it waited or was held: no step starts (the claim read it)
            pausing.pause_now(lease)
            return AdvanceOutcome(claimed=True)
        workflow = _pinned_workflow(store, lease, run)
        if workflow is None:
            return AdvanceOutcome(claimed=True)
        return _run_steps(store, lease, run, workflow)
    except LeaseLost:
        log.warning("lease lost; stopping without writing")
        return AdvanceOutcome(claimed=True)


def run_contract(run: Run) -> Contract:
    return Contract(run.workflow_name, run.workflow_version, run.topology_fingerprint,
                    tuple(shapes_from_json(run.topology or [])),
                    {name: getattr(run, name) for name in PINNABLE})


def _pinned_workflow(store: RunStore, lease: Lease, run: Run) -> Workflow | None:
    """The replay contract, checked before any step runs: same version, shape and pinned releases."""
    try:
        workflow: Workflow | None = registry.get(run.workflow_name, run.workflow_version)
    except UnknownWorkflow:
        workflow = None
    refusal = check_contract(run_contract(run), workflow.as_contract() if workflow else None,
                             workflow.pinned if workflow else ())
    if refusal is not None:
        block(store, lease, run, run.current_step, refusal)
        return None
    return workflow


def block(store: RunStore, lease: Lease, run: Run, step: str, refusal: Refusal,
          kind: str = JournalEntry.Kind.CONTRACT_BLOCKED) -> None:
    """Stop the run in BLOCKED_VERSION (counted as a version mismatch, by the refusal's kind)."""
    store.block(lease, step, kind, refusal.as_json())
    metrics.run_blocked(run.workflow_name, run.workflow_version, refusal.kind)
    log.warning("run blocked on its version: %s", refusal.message)


def hold_on_mismatch(store: RunStore, lease: Lease, run: Run, step: str, mismatch: Mismatch | None,
                     message: str) -> None:
    """A re-executed visit asked for something else than it recorded: the run is held in BLOCKED_VERSION with the
    difference shown, never failed. Nothing was sent; once the code asks what it recorded again (fixed, or the
    change guarded by ctx.patched), an operator's resume (BLOCKED_VERSION -> PENDING) takes it on from that visit.
    BLOCKED_VERSION rather than NEEDS_ATTENTION: the cause is the code the worker runs, not an operation of unknown
    outcome, and the remedy is a deploy, as for every other refusal of the replay contract."""
    reason: dict[str, Any] = {"kind": "replay_violation", "message": mismatch.message if mismatch else message}
    if mismatch is not None:
        reason["mismatch"] = mismatch.as_json()
    store.block(lease, step, JournalEntry.Kind.REPLAY_VIOLATION, reason)
    metrics.run_blocked(run.workflow_name, run.workflow_version, "replay_violation")
    log.warning("run held on a replay mismatch: %s", reason["message"])


def _restore(store: RunStore, lease: Lease, run: Run, workflow: Workflow) -> tuple[BaseModel, str] | None:
    """The state at the newest checkpoint and the step to run next, or None when it cannot be read back."""
    point = store.resume_point(lease)
    try:
        readable = upcast(point.state, point.state_schema_version, workflow.checkpoint_schema_version,
                          workflow.upcasters)
        if not isinstance(readable, Refusal):
            return workflow.state.model_validate(readable), point.next_step
    except Exception as exc:  # an upcaster's bug or a state that no longer validates: the run must stop, not loop
        readable = Refusal("schema_unreadable", f"checkpoint #{point.seq} (schema v{point.state_schema_version}) "
                                                f"cannot be read as {workflow.state.__name__}: {exc}")
    metrics.checkpoint_unreadable(run.workflow_name, run.workflow_version)
    block(store, lease, run, point.next_step, readable)
    return None


def _run_steps(store: RunStore, lease: Lease, run: Run, workflow: Workflow) -> AdvanceOutcome:
    restored = _restore(store, lease, run, workflow)
    if restored is None:
        return AdvanceOutcome(claimed=True)
    state, step_name = restored
    # Only the visit the run resumes with can have recorded results: every later one starts from a checkpoint
    # this task writes (a retry or a wake is a new task, which reads them again).
    recorded = store.recorded_calls(lease, step_name)
    with store.overlapping():  # a step's write may be in flight while the next step runs
        return _step_loop(store, lease, run, workflow, state, step_name, recorded)


def _step_loop(store: RunStore, lease: Lease, run: Run, workflow: Workflow, state: BaseModel, step_name: str,
               recorded: list[RecordedCall]) -> AdvanceOutcome:
    attempt = run.attempt
    deadline = time.monotonic() + durable_settings.DURABLE_TIME_SLICE_SECONDS
    budget = workflow.step_budget(durable_settings.DURABLE_MAX_STEP_VISITS)
    done = 0
    came_from: str | None = None  # the step whose route led here, when it ran in this task
    woke_from = run.waiting_for  # the wait the run was parked on, taken up again by the visit it resumes
    meter = costs.Meter(run)  # what the run spent on model calls, kept up to date by this task's visits
    looks = pausing.watched(store, lease)  # whether an operator asked it to pause: between steps, or before a call leaves
    while True:
        if lease.seq >= budget:  # the newest checkpoint's seq is the number of visits made (seq 0: the start)
            _out_of_budget(store, lease, run, workflow, step_name, came_from, attempt, budget)
            return AdvanceOutcome(claimed=True, steps=done)
        with logs.bound(step=step_name, attempt=attempt):
            step = workflow.get_step(step_name)
            cursor = ReplayCursor(step_name, recorded, lease.seq)
            ctx = StepContext(Visit(
                run_id=run.id, business_key=run.business_key, workflow_name=workflow.name,
                workflow_version=workflow.version, step=step_name, attempt=attempt, lease=lease, store=store,
                cursor=cursor, declared_side_effects=step.side_effects,
                woke_from=woke_from, meter=meter, priority=run.priority, run_input=run.input,
                family_root=run.family_root,
            ))
            recorded, woke_from = [], None  # the next visit starts from a checkpoint written below: a new visit
            try:
                state, next_step = _execute_step(workflow, step, ctx, state)
                if cursor.mismatch is not None:  # the step caught its replay mismatch and went on: held all the same
                    raise ReplayMismatch(cursor.mismatch)
                state_json, output = _what_to_write(workflow, step_name, state, last=next_step is None)
            except LeaseLost:
                raise
            except (AwaitingApproval, Waiting):  # the wait is committed; nothing holds a worker now
                return AdvanceOutcome(claimed=True, steps=done)
            except PauseSeen:  # before the visit's first call left: nothing of it is written, it runs again on resume
                pausing.pause_now(lease)
                return AdvanceOutcome(claimed=True, steps=done)
            except BudgetExhausted as exc:  # before a model call, nothing asked: an operator raises it or cancels
                costs.stop(store, lease, workflow.name, workflow.version, step_name, exc)
                return AdvanceOutcome(claimed=True, steps=done)
            except ReplayContractViolation as exc:
                hold_on_mismatch(store, lease, run, step_name, cursor.mismatch, str(exc))
                return AdvanceOutcome(claimed=True, steps=done)
            except NeedsAttention as exc:
                store.needs_attention(lease, step_name, {"kind": UNKNOWN_SIDE_EFFECT, "message": str(exc),
                                                         "operation_id": exc.operation_id})
                log.warning("run needs attention: %s", exc)
                return AdvanceOutcome(claimed=True, steps=done)
            except Exception as exc:  # classified below: the one retry owner is this layer
                if cursor.mismatch is not None:  # a replay mismatch the step turned into another error
                    hold_on_mismatch(store, lease, run, step_name, cursor.mismatch, str(exc))
                    return AdvanceOutcome(claimed=True, steps=done)
                return _handle_step_error(store, lease, workflow, step_name, attempt, exc, done)
            done += 1
            if next_step is None:
                with wakes.child_ends(run.id, run.parent_run_id):
                    store.finish(lease, step_name, state_json, workflow.checkpoint_schema_version, output)
                return AdvanceOutcome(claimed=True, steps=done)
            # The checkpoint's (step, next_step) is the route taken: a loop's way back is recorded like any other.
            store.commit_step(lease, step_name, next_step, state_json, workflow.checkpoint_schema_version)
        came_from, step_name, attempt = step_name, next_step, 0
        if looks.at_boundary(before_side_effects=bool(workflow.get_step(step_name).side_effects)):
            pausing.pause_now(lease)  # the step's checkpoint is written: the run resumes with the next one
            return AdvanceOutcome(claimed=True, steps=done)
        if time.monotonic() >= deadline:
            store.release(lease)  # let other runs have this worker; the task re-enqueues us
            return AdvanceOutcome(claimed=True, steps=done, requeue=True)


def _out_of_budget(store: RunStore, lease: Lease, run: Run, workflow: Workflow, step: str, came_from: str | None,
                   attempt: int, budget: int) -> None:
    """The run made as many visits as its step budget allows: it ends FAILED, visibly, never loops forever."""
    last = came_from if came_from is not None else store.checkpoint_step(lease)
    route = f"{last} -> {step}"
    message = (f"the run used its step budget of {budget} step visits without finishing (last route: {route}); "
               "if the work is real, raise the workflow's max_visits, else fix the route that loops")
    error = {"retryable": False, "kind": "step_budget_exhausted", "message": message, "type": "step_budget",
             "visits": lease.seq, "max_visits": budget, "last_route": route}
    _give_up(store, lease, step, attempt, error, message)
    metrics.step_budget_exhausted(workflow.name, workflow.version)
    log.warning("run stopped by its step budget: %d visits, last route %s", lease.seq, route)


@tracing.visit
def _execute_step(workflow: Workflow, step: Step, ctx: StepContext, state: BaseModel) -> tuple[BaseModel, str | None]:
    """Run the step; its new state and the route it takes (None: the run ends), checked against its graph."""
    try:
        result = step.fn(ctx, state)
    finally:  # re-executed, however it ended this time
        if ctx.replayed_calls:
            metrics.step_replayed(workflow.name, workflow.version)
    next_step, chosen = workflow.graph.choose(step.name, result)
    new_state = state if chosen is None else chosen
    if not isinstance(new_state, workflow.state):
        raise TypeError(f"step {step.name!r} returned {type(new_state).__name__}, not {workflow.state.__name__}")
    return workflow.state.model_validate(new_state.model_dump()), next_step  # re-validate what the step changed


def _what_to_write(workflow: Workflow, step_name: str, state: BaseModel, *, last: bool) -> tuple[dict[str, Any], Any]:
    """The step's checkpoint state and, after the last step, the run's output: refused (NotStorable) when the
    database cannot store them, so the run fails for good instead of resuming into the same write error."""
    state_json = state.model_dump(mode="json")
    refuse_unstorable(state_json, what=f"state after step {step_name!r}", kind="state_not_storable")
    refuse_too_large(state_json, what=f"the state after step {step_name!r}", kind="state_too_large",
                     limit=durable_settings.DURABLE_MAX_VALUE_BYTES)
    if not last:
        return state_json, None
    output = workflow.build_output(state)
    refuse_unstorable(output, what=f"output built after step {step_name!r}", kind="state_not_storable")
    return state_json, output


def _handle_step_error(store: RunStore, lease: Lease, workflow: Workflow, step: str, attempt: int,
                       exc: Exception, done: int) -> AdvanceOutcome:
    verdict = classify(exc) if not isinstance(exc, ValidationError) else classify(TypeError(str(exc)))
    attempts_made = attempt + 1
    policy = workflow.retry_policy_for(step)
    error = {**verdict.as_json(), "step": step, "attempt": attempts_made}
    if verdict.retryable and policy.allows_another(attempts_made):
        delay = policy.delay(attempts_made, retry_after=verdict.retry_after)
        store.schedule_retry(lease, step, attempts_made, delay, error)
        metrics.retry_scheduled(workflow.name, workflow.version)
        log.info("step %s failed (%s); retry %d in %.2fs", step, verdict.kind, attempts_made + 1, delay)
        return AdvanceOutcome(claimed=True, steps=done, retry_in=delay)
    if verdict.retryable:
        error["exhausted"] = True
    _give_up(store, lease, step, attempts_made, error, verdict.message)
    if verdict.retryable:
        metrics.retries_exhausted(workflow.name, workflow.version)
    else:
        metrics.failed_for_good(workflow.name, workflow.version)
    return AdvanceOutcome(claimed=True, steps=done)


def _give_up(store: RunStore, lease: Lease, step: str, attempts_made: int, error: dict[str, Any], message: str) -> None:
    """Fail the run, unless an operation it started may have happened: then an operator must look first."""
    unsure = side_effects.mark_unsettled_unknown(store, lease, f"step {step} gave up: {message}")
    if unsure:  # never report as failed what may have happened (invariant 4)
        message = f"gave up with operation(s) {', '.join(unsure)} of unknown outcome"
        store.needs_attention(lease, step, {**error, "kind": UNKNOWN_SIDE_EFFECT, "operation_id": unsure[0],
                                            "message": message})
        log.warning("step %s gave up with operation(s) %s of unknown outcome", step, ", ".join(unsure))
        return
    with wakes.child_ends(lease.run_id, wakes.parent_of(lease.run_id)):
        store.fail(lease, step, attempts_made, error)
    log.info("step %s failed for good: %s", step, message)
