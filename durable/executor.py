"""The executor: advance one run under its lease, step after step, until it waits or ends."""
from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings
from pydantic import BaseModel, ValidationError

from durable import side_effects
from durable.context import StepContext
from durable.engine.contract import PINNABLE, Contract, Refusal, check_contract, upcast
from durable.engine.errors import AwaitingApproval, LeaseLost, NeedsAttention, ReplayContractViolation, classify
from durable.engine.replay import ReplayCursor
from durable.engine.topology import shapes_from_json
from durable.models import JournalEntry, Run
from durable.registry import UnknownWorkflow, registry
from durable.store import Lease, RunStore, store
from durable.workflow import Workflow

log = logging.getLogger("durable.executor")


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Outcome:
    """What one call of `advance` did, for the task and for tests."""

    claimed: bool
    steps: int = 0
    requeue: bool = False
    retry_in: float | None = None


def advance(run_id: UUID | str, *, owner: str | None = None) -> Outcome:
    """Claim the run's lease and run its steps until it finishes, waits or its time slice ends."""
    db = store()
    claimed = db.claim(run_id, owner or worker_id(), settings.DURABLE_LEASE_SECONDS)
    if claimed is None:
        return Outcome(claimed=False)
    lease, run = claimed
    try:
        workflow = _pinned_workflow(db, lease, run)
        if workflow is None:
            return Outcome(claimed=True)
        return _run_steps(db, lease, run, workflow)
    except LeaseLost:
        log.warning("lease lost; stopping without writing", extra={"run_id": str(run_id)})
        return Outcome(claimed=True)


def run_contract(run: Run) -> Contract:
    return Contract(run.workflow_name, run.workflow_version, run.topology_fingerprint,
                    tuple(shapes_from_json(run.topology or [])),
                    {name: getattr(run, name) for name in PINNABLE})


def _pinned_workflow(db: RunStore, lease: Lease, run: Run) -> Workflow | None:
    """The replay contract, checked before any step runs: same version, shape and pinned releases."""
    try:
        workflow: Workflow | None = registry.get(run.workflow_name, run.workflow_version)
    except UnknownWorkflow:
        workflow = None
    refusal = check_contract(run_contract(run), workflow.as_contract() if workflow else None,
                             workflow.pinned if workflow else ())
    if refusal is not None:
        block(db, lease, run.current_step, refusal)
        return None
    return workflow


def block(db: RunStore, lease: Lease, step: str, refusal: Refusal) -> None:
    db.block(lease, step, JournalEntry.Kind.CONTRACT_BLOCKED, refusal.as_json())


def _run_steps(db: RunStore, lease: Lease, run: Run, workflow: Workflow) -> Outcome:
    point = db.resume_point(lease)
    readable = upcast(point.state, point.state_schema_version, workflow.checkpoint_schema_version, workflow.upcasters)
    if isinstance(readable, Refusal):
        block(db, lease, point.next_step, readable)
        return Outcome(claimed=True)
    state = workflow.state.model_validate(readable)
    step_name, attempt = point.next_step, run.attempt
    deadline = time.monotonic() + settings.DURABLE_TIME_SLICE_SECONDS
    recorded = db.recorded_calls(run.id)  # each step runs at most once per task, so this stays true
    done = 0
    while True:
        ctx = StepContext(
            run_id=run.id, business_key=run.business_key, workflow_name=workflow.name,
            workflow_version=workflow.version, step=step_name, attempt=attempt, lease=lease, store=db,
            cursor=ReplayCursor(step_name, recorded.get(step_name, [])),
            side_effects=workflow.get_step(step_name).side_effects,
        )
        try:
            state = _execute_step(workflow, step_name, ctx, state)
        except LeaseLost:
            raise
        except AwaitingApproval:  # the request and the wait are committed; nothing holds a worker now
            return Outcome(claimed=True, steps=done)
        except ReplayContractViolation as exc:
            db.block(lease, step_name, JournalEntry.Kind.REPLAY_VIOLATION, {"kind": "replay_violation", "message": str(exc)})
            return Outcome(claimed=True, steps=done)
        except NeedsAttention as exc:
            db.needs_attention(lease, step_name, {"kind": "unknown_side_effect", "message": str(exc),
                                                  "operation_id": exc.operation_id})
            return Outcome(claimed=True, steps=done)
        except Exception as exc:  # classified below: the one retry owner is this layer
            return _handle_step_error(db, lease, workflow, step_name, attempt, exc, done)
        done += 1
        next_step = workflow.next_step(step_name)
        state_json = state.model_dump(mode="json")
        if next_step is None:
            db.finish(lease, step_name, state_json, workflow.checkpoint_schema_version, workflow.build_output(state))
            return Outcome(claimed=True, steps=done)
        db.commit_step(lease, step_name, next_step, state_json, workflow.checkpoint_schema_version)
        step_name, attempt = next_step, 0
        if time.monotonic() >= deadline:
            db.release(lease)  # let other runs have this worker; the task re-enqueues us
            return Outcome(claimed=True, steps=done, requeue=True)


def _execute_step(workflow: Workflow, step_name: str, ctx: StepContext, state: BaseModel) -> BaseModel:
    step = workflow.get_step(step_name)
    result = step.fn(ctx, state)
    new_state = state if result is None else result
    if not isinstance(new_state, workflow.state):
        raise TypeError(f"step {step_name!r} returned {type(new_state).__name__}, not {workflow.state.__name__}")
    return workflow.state.model_validate(new_state.model_dump())  # re-validate what the step changed


def _handle_step_error(db: RunStore, lease: Lease, workflow: Workflow, step: str, attempt: int,
                       exc: Exception, done: int) -> Outcome:
    verdict = classify(exc) if not isinstance(exc, ValidationError) else classify(TypeError(str(exc)))
    attempts_made = attempt + 1
    policy = workflow.retry_policy_for(step)
    error = {**verdict.as_json(), "step": step, "attempt": attempts_made}
    if verdict.retryable and policy.allows_another(attempts_made):
        delay = policy.delay(attempts_made)
        db.schedule_retry(lease, step, attempts_made, delay, error)
        log.info("step %s failed (%s); retry %d in %.2fs", step, verdict.kind, attempts_made + 1, delay,
                 extra={"run_id": str(lease.run_id)})
        return Outcome(claimed=True, steps=done, retry_in=delay)
    if verdict.retryable:
        error["exhausted"] = True
    unsure = side_effects.mark_unsettled_unknown(db, lease, f"step {step} gave up: {verdict.message}")
    if unsure:  # never report as failed what may have happened (invariant 4)
        db.needs_attention(lease, step, {**error, "kind": "unknown_side_effect", "operation_id": unsure[0],
                                         "message": f"gave up with operation(s) {', '.join(unsure)} of unknown outcome"})
        return Outcome(claimed=True, steps=done)
    db.fail(lease, step, attempts_made, error)
    log.info("step %s failed for good: %s", step, verdict.message, extra={"run_id": str(lease.run_id)})
    return Outcome(claimed=True, steps=done)
