"""The step context: the runtime's `durable.Context`, what workflow code may ask of durable inside a step.

What each call means for an author is written on `durable.Context` (durable/context.py); this class answers it on
the step's thread, through the visit's machinery (durable/runtime/visit.py), which it shares with waits.py,
parallel.py and side_effects.py.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from durable import tracing
from durable.context import Call, Context, Effect
from durable.downstream import Downstream
from durable.engine.approvals import Path
from durable.engine.costs import UsageOf
from durable.engine.errors import WrongThread
from durable.engine.waits import ChildRun, Event
from durable.models import Checkpoint
from durable.runtime import limits, parallel, patches, pausing, side_effects, waits
from durable.runtime.gates import ApprovalAsk, GateSite, approval_gate
from durable.runtime.heartbeat import lease_kept
from durable.runtime.stream import publish
from durable.runtime.visit import Visit

T = TypeVar("T", bound=BaseModel)


class StepContext:
    """One visit of a step as its code sees it: each call checked to come from the step's thread, then made."""

    def __init__(self, visit: Visit) -> None:
        self._visit = visit
        self.run_id = visit.run_id
        self.business_key = visit.business_key
        self.workflow_name = visit.workflow_name
        self.workflow_version = visit.workflow_version
        self.step = visit.step
        self.attempt = visit.attempt
        self.visit = visit.visit
        self._thread = threading.get_ident()  # the step's thread: calls are numbered on it, in the order made
        self._approvals_asked = 0  # position of the next request_approval in this visit, less one
        self._visit_number: int | None = None
        self._patches: dict[str, bool] = {}  # the visit's patch answers (durable/runtime/patches.py)

    @property
    def visit_number(self) -> int:
        """Read from the checkpoints once, if asked."""
        if self._visit_number is None:
            self._visit_number = Checkpoint.objects.filter(run_id=self.run_id, seq__lte=self.visit,
                                                           next_step=self.step).count()
        return self._visit_number

    @property
    def replayed_calls(self) -> int:
        return self._visit.cursor.reused

    def patched(self, name: str) -> bool:
        self._on_step_thread("patched")
        return patches.patched(self._visit, name, self._patches, self._approvals_asked)

    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T] | None = None,
                 usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Any:
        self._on_step_thread("activity")
        visit = self._visit
        index, recorded = visit.reserve(name)
        if recorded is not None:
            result = visit.reused(name, recorded)
        else:
            pausing.before_call(visit.lease)  # a pause asked: PauseSeen, before any room in a limit is taken
            if usage is not None:
                visit.meter.before_model_call(name)  # BudgetExhausted: the run waits, the model is not asked
            # Room in its limit first (or the run parks); a slow model must not let a second worker ask again: the
            # lease is kept while it answers, and a cancel ends the wait at once (durable/runtime/heartbeat.py).
            with limits.held(visit, limit, index, usage) as room, \
                    lease_kept(visit.store, visit.lease) as kept, tracing.activity(visit, name, index):
                room.answers.append(kept.call(room.on_time(fn), *args, **kwargs))
            result = visit.record(name, index, room.answers[0], usage)
        return returns.model_validate(result) if returns is not None else result

    def call(self, name: str, fn: Callable[..., Any], *args: Any, returns: type | None = None,
             usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Call:
        return Call(name, fn, args, kwargs, returns, usage, limit)

    def effect(self, action: str, *, business_key: str, downstream: Downstream,
               payload: dict[str, Any]) -> Effect:
        return Effect(action, business_key, downstream, payload)

    def parallel(self, *calls: Call | Effect) -> list[Any]:
        self._on_step_thread("parallel")
        return parallel.run_group(self._visit, calls)

    def _on_step_thread(self, what: str) -> None:
        if threading.get_ident() != self._thread:
            raise WrongThread(what, self.step, threading.current_thread().name)

    @tracing.waits("approval")
    def request_approval(self, kind: str, *, snapshot: dict[str, Any] | Callable[[], dict[str, Any]],
                         approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                         revalidate: Callable[[dict[str, Any]], Any], expires_in: timedelta,
                         on_invalid: str = "ask_again", on_expiry: str = "fail",
                         approvers: int | Callable[[dict[str, Any]], int] = 1) -> dict[str, Any]:
        self._on_step_thread("request_approval")
        gate = approval_gate()  # the approvals app's, registered from its ready(); without it, a clear refusal
        self._approvals_asked += 1
        visit = self._visit
        site = GateSite(visit.store, visit.lease, self.run_id, self.step, self.workflow_name, self.workflow_version,
                        self.business_key, self.visit, self._approvals_asked)
        return gate(site, ApprovalAsk(kind, snapshot, approve, revalidate, expires_in, Path(on_invalid),
                                      Path(on_expiry), approvers))

    def stream(self, data: Any, *, kind: str | None = None) -> None:
        publish(self._visit, data, kind)  # from any thread: it is not numbered among the visit's calls

    # Waits (durable.runtime.waits): the run is parked, released, until the wait ends.

    @tracing.waits("timer")
    def sleep(self, duration: timedelta) -> None:
        self._on_step_thread("sleep")
        waits.sleep(self._visit, duration)

    @tracing.waits("timer")
    def sleep_until(self, until: datetime) -> None:
        self._on_step_thread("sleep_until")
        waits.sleep_until(self._visit, until)

    @tracing.waits("event")
    def wait_for_event(self, names: str | Sequence[str], *, timeout: timedelta | None = None) -> Event | None:
        self._on_step_thread("wait_for_event")
        return waits.wait_for_event(self._visit, names, timeout)

    def start_child(self, workflow: str, *, input: dict[str, Any], business_key: str) -> ChildRun:
        self._on_step_thread("start_child")
        return waits.start_child(self._visit, workflow, input, business_key)

    @tracing.waits("child")
    def wait_child(self, child: ChildRun) -> Any:
        self._on_step_thread("wait_child")
        return waits.wait_children(self._visit, [child])[0]

    @tracing.waits("child")
    def wait_children(self, children: Sequence[ChildRun]) -> list[Any]:
        self._on_step_thread("wait_children")
        return waits.wait_children(self._visit, children)

    def side_effect(self, action: str, *, business_key: str, downstream: Downstream,
                    payload: dict[str, Any]) -> dict[str, Any]:
        self._on_step_thread("side_effect")
        return side_effects.perform(self._visit, action=action, business_key=business_key, downstream=downstream,
                                    payload=payload)


if TYPE_CHECKING:  # mypy proves the step context is a durable.Context: every member, with the signature promised
    _IS_A_CONTEXT: type[Context] = StepContext
