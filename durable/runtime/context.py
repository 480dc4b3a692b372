"""The step context: what workflow code may ask of durable inside a step."""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel

from durable import metrics, tracing
from durable.downstream import Downstream
from durable.engine.approvals import Path
from durable.engine.errors import NonRetryableError, WrongThread, refuse_unstorable
from durable.engine.replay import RecordedCall, ReplayCursor
from durable.engine.waits import ChildRun, Event
from durable.models import Checkpoint
from durable.runtime import costs, parallel, side_effects, waits
from durable.runtime.gates import ApprovalAsk, GateSite, approval_gate
from durable.runtime.heartbeat import lease_kept
from durable.store import Lease, RunStore

log = logging.getLogger("durable.activity")
T = TypeVar("T", bound=BaseModel)  # what `returns=` names: a pydantic model


def to_json(value: Any) -> Any:
    """The JSON form a result is recorded in; live and replayed calls both return it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"activity results must be JSON-serialisable, got {type(value).__name__}")


class StepContext:
    """One visit of a step: what its code may ask of durable, on the thread that runs it."""

    def __init__(self, *, run_id: UUID, business_key: str, workflow_name: str, workflow_version: int,
                 step: str, attempt: int, lease: Lease, store: RunStore, cursor: ReplayCursor,
                 side_effects: tuple[str, ...] = (), woke_from: dict[str, Any] | None = None,
                 meter: costs.Meter | None = None) -> None:
        self.run_id = run_id
        self.business_key = business_key
        self.workflow_name = workflow_name
        self.workflow_version = workflow_version
        self.step = step
        self.attempt = attempt
        # The visit: the seq of the checkpoint this execution of the step started from. Its records (activity
        # results, approval requests) are its own: re-executed, it reuses them; a later visit asks afresh.
        self.visit = lease.seq
        self._lease = lease
        self._store = store
        self._cursor = cursor
        self._declared_side_effects = side_effects
        self._thread = threading.get_ident()  # the step's thread: calls are numbered on it, in the order made
        self._approvals_asked = 0  # position of the next request_approval in this visit, less one
        self._visit_number: int | None = None
        # What the run waited for when it was claimed (Run.waiting_for): the wait a call of this visit takes up
        # again, keeping its due time (durable.runtime.waits).
        self.woke_from = woke_from
        self._meter = meter or costs.Meter(None)  # the run's spending on model calls, and its budget

    @property
    def visit_number(self) -> int:
        """Which visit of this step this is, counted from 1 (`act #3`): read from the checkpoints once, if asked."""
        if self._visit_number is None:
            self._visit_number = Checkpoint.objects.filter(run_id=self.run_id, seq__lte=self.visit,
                                                           next_step=self.step).count()
        return self._visit_number

    @property
    def replayed_calls(self) -> int:
        """How many recorded activity results this step has reused so far."""
        return self._cursor.reused

    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T] | None = None,
                 usage: costs.UsageOf | None = None, **kwargs: Any) -> Any:
        """Run a non-deterministic call (LLM, read) once; on replay return what it returned then.

        The result is recorded as JSON before the step goes on. Pass `returns=SomeModel` to
        get it back as that pydantic model, live and on replay alike. A model call says so with
        `usage=`, a function of its answer returning a `durable.Usage` (or None): what it used is
        recorded and priced with its result, and the run's budget is checked before it is made.
        """
        self._on_step_thread("activity")
        index, recorded = self._reserve(name)
        if recorded is not None:
            result = self._reused(name, recorded)
        else:
            if usage is not None:
                self._meter.before_model_call(name)  # BudgetExhausted: the run waits, the model is not asked
            # A slow model must not let a second worker ask again: the lease is kept while it answers.
            with lease_kept(self._store, self._lease), tracing.activity(self, name, index):
                answer = fn(*args, **kwargs)
            result = self._record(name, index, answer, usage)
        return returns.model_validate(result) if returns is not None else result

    def call(self, name: str, fn: Callable[..., Any], *args: Any, returns: type | None = None,
             usage: costs.UsageOf | None = None, **kwargs: Any) -> parallel.Call:
        """An activity for `ctx.parallel`: made as `ctx.activity(name, fn, *args, **kwargs)` would make it."""
        return parallel.Call(name, fn, args, kwargs, returns, usage)

    def effect(self, action: str, *, business_key: str, downstream: Downstream,
               payload: dict[str, Any]) -> parallel.Effect:
        """A side effect for `ctx.parallel`: performed as `ctx.side_effect(...)` would perform it."""
        return parallel.Effect(action, business_key, downstream, payload)

    def parallel(self, *calls: parallel.Call | parallel.Effect) -> list[Any]:
        """Make the calls at once (at most DURABLE_PARALLEL_CALLS together); their results in the order given.

        Each call is recorded under its own index, reserved in the order given, so a visit run again reuses
        what finished and calls only the rest. One failure is raised as it is; several as ParallelCallsFailed
        naming each (retryable only if each is). See docs/workflows.md, "Parallel calls".
        """
        self._on_step_thread("parallel")
        return parallel.run_group(self, calls)

    # The steps of a call, shared by ctx.activity and ctx.parallel (which runs only the call itself elsewhere).

    def _on_step_thread(self, what: str) -> None:
        if threading.get_ident() != self._thread:
            raise WrongThread(what, self.step, threading.current_thread().name)

    def _reserve(self, name: str) -> tuple[int, RecordedCall | None]:
        """The call's index in this visit, and its recorded result if the visit made it before."""
        refuse_unstorable(name, what=f"the name of activity {name!r}", kind="result_not_storable")
        return self._cursor.next_call(name)

    def _reused(self, name: str, recorded: RecordedCall) -> Any:
        metrics.result_reused(self.workflow_name, self.workflow_version)
        tracing.reused(self, name, recorded.call_index)
        log.info("activity %s replayed: its recorded result is returned", name, extra={"activity": name})
        if self._cursor.replayed_all:  # the step goes live from here: say once what it took from history
            self._store.record_reuse(self._lease, self.step, [
                {"call_index": call.call_index, "name": call.name} for call in self._cursor.reused_calls])
        return recorded.result

    def _record(self, name: str, index: int, answer: Any, usage: costs.UsageOf | None = None) -> Any:
        result = self._recordable(name, answer)
        if usage is None:
            self._store.record_activity(self._lease, self.step, index, name, result)
        else:
            for used in costs.record(self._store, self._lease, self.step, self._meter, self.workflow_name,
                                     [(index, name, result, answer, usage)]):  # a model call: its span, if traced
                tracing.model_call(used.usage.model, used.usage.input_tokens, used.usage.output_tokens)
        return result

    @staticmethod
    def _recordable(name: str, answer: Any) -> Any:
        """The answer as it is recorded (JSON), refused before it is recorded if the database cannot store it."""
        result = to_json(answer)
        refuse_unstorable(result, what=f"the result of activity {name!r}", kind="result_not_storable")
        return result

    @tracing.waits("approval")
    def request_approval(self, kind: str, *, snapshot: dict[str, Any] | Callable[[], dict[str, Any]],
                         approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                         revalidate: Callable[[dict[str, Any]], Any], expires_in: timedelta,
                         on_invalid: str = "ask_again", on_expiry: str = "fail",
                         approvers: int | Callable[[dict[str, Any]], int] = 1) -> dict[str, Any]:
        """Pause the run until a human decides; return the approval once it still holds.

        `snapshot` (a dict, or a function reading it fresh) is what the approver sees; `approve`
        is exactly what is approved (action, amount, target), or a function of the snapshot.
        `revalidate(snapshot)` must be a module-level function returning a `Revalidation`: it
        runs when the request is made, when a human decides, and right before the run acts.
        Invalidated or expired requests take `on_invalid`/`on_expiry`: "ask_again" or "fail".
        Rejection raises `ApprovalRejected`. Give the approval a step of its own: the step
        runs again from its start once the decision is in.
        """
        self._on_step_thread("request_approval")
        gate = approval_gate()  # the approvals app's, registered from its ready(); without it, a clear refusal
        self._approvals_asked += 1
        site = GateSite(self._store, self._lease, self.run_id, self.step, self.workflow_name, self.workflow_version,
                        self.business_key, self.visit, self._approvals_asked)
        return gate(site, ApprovalAsk(kind, snapshot, approve, revalidate, expires_in, Path(on_invalid),
                                      Path(on_expiry), approvers))

    # Waits (durable.runtime.waits): the run is parked, released, until the wait ends; the visit then runs again
    # from its start and each wait returns what it recorded. See docs/workflows.md, "Timers, events and child runs".

    @tracing.waits("timer")
    def sleep(self, duration: timedelta) -> None:
        """Pause the run for `duration` (from when the visit first got here), by the database's clock."""
        self._on_step_thread("sleep")
        waits.sleep(self, duration)

    @tracing.waits("timer")
    def sleep_until(self, until: datetime) -> None:
        """Pause the run until `until` (an aware datetime), by the database's clock."""
        self._on_step_thread("sleep_until")
        waits.sleep_until(self, until)

    @tracing.waits("event")
    def wait_for_event(self, names: str | Sequence[str], *, timeout: timedelta | None = None) -> Event | None:
        """The next event named `names` (or one of them) sent to this run, consumed once; None if `timeout`
        passes first. Events sent before the wait began wait in the run's mailbox, in arrival order."""
        self._on_step_thread("wait_for_event")
        return waits.wait_for_event(self, names, timeout)

    def start_child(self, workflow: str, *, input: dict[str, Any], business_key: str) -> ChildRun:
        """Start a run of `workflow` as this run's child, once for this visit and key, whatever crashes."""
        self._on_step_thread("start_child")
        return waits.start_child(self, workflow, input, business_key)

    @tracing.waits("child")
    def wait_child(self, child: ChildRun) -> Any:
        """The child run's output once it has ended; ChildRunFailed if it did not succeed."""
        self._on_step_thread("wait_child")
        return waits.wait_children(self, [child])[0]

    @tracing.waits("child")
    def wait_children(self, children: Sequence[ChildRun]) -> list[Any]:
        """The outputs of all `children` (in the order given) once every one has ended."""
        self._on_step_thread("wait_children")
        return waits.wait_children(self, children)

    def side_effect(self, action: str, *, business_key: str, downstream: Downstream,
                    payload: dict[str, Any]) -> dict[str, Any]:
        """Perform an external action exactly once (the ledger's Prepare -> Execute -> Commit).

        The operation id, sha256("run_id:action:business_key")[:32], is the Idempotency-Key
        sent to downstreams that honour one. Re-entry returns the recorded result.
        """
        self._on_step_thread("side_effect")
        payload = self._checked_effect(action, business_key, payload)
        return side_effects.perform(self._store, self._lease, step=self.step, action=action,
                                    business_key=business_key, downstream=downstream, payload=payload)

    def _checked_effect(self, action: str, business_key: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload as recorded, once the action is declared and what the code chose can be stored."""
        if action not in self._declared_side_effects:
            raise NonRetryableError(
                f"step {self.step!r} performs side effect {action!r} but does not declare it; "
                f"add side_effects=[{action!r}] to its @step (it is part of the topology fingerprint)",
                kind="undeclared_side_effect",
            )
        payload = to_json(payload)
        # Chosen by workflow code before anything is prepared or sent: refused, so nothing reaches the ledger.
        refuse_unstorable(business_key, what=f"the business key of side effect {action!r}", kind="payload_not_storable")
        refuse_unstorable(payload, what=f"the payload of side effect {action!r}", kind="payload_not_storable")
        return payload
