"""A step's waits: timers, events from outside and child runs (docs/workflows.md, "Timers, events and child runs").

Each wait is a call of the visit like an activity: it takes the next call index, and its outcome (the timer
fired, the event consumed, the deadline passed, how the children ended) is recorded there when the wait ends,
so a visit re-executed after a crash or a wake returns it at once (invariant 16). Until then the run is parked
WAITING, released, with what it waits for on the run and its due time in `next_attempt_at` (invariant 17); the
visit re-executes from its start when the database's clock, an event or the children's end wakes it.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, NoReturn

from django.db import transaction
from pydantic import ValidationError

from durable import metrics
from durable.conf import durable_settings
from durable.engine.errors import ChildKeyTaken, ChildRunFailed, NonRetryableError, Waiting, refuse_unstorable
from durable.engine.states import RunStatus
from durable.engine.waits import ChildRun, Event, WaitingFor, WaitKind, check_event_name, child_start_key
from durable.errors import Conflict
from durable.models import Run
from durable.registry import registry
from durable.runtime import wakes
from durable.runtime.fault_points import AFTER_CHILD_STARTED, AFTER_CHILDREN_ENDED, AFTER_EVENT_CONSUMED, fault_point
from durable.runtime.visit import Visit

log = logging.getLogger("durable.waits")

# A timer due within this many sweep periods is also armed in the process that parks it (durable.runtime.wakes.arm).
ARM_WITHIN_SWEEPS = 2
SLEEP, WAIT_FOR_EVENT, START_CHILD, WAIT_CHILD = ("durable.sleep", "durable.wait_for_event", "durable.start_child",
                                                   "durable.wait_child")


def sleep_until(visit: Visit, until: datetime) -> None:
    """Return once the database's clock has reached `until`; until then the run is parked, not a worker."""
    if until.tzinfo is None:
        raise NonRetryableError(f"ctx.sleep_until needs an aware datetime, got {until!r}", kind="invalid_timer")
    _timer(visit, lambda: until)


def sleep(visit: Visit, duration: timedelta) -> None:
    """Sleep `duration` from when the visit first reached this call, by the database's clock."""
    if duration < timedelta(0):
        raise NonRetryableError(f"ctx.sleep needs a duration >= 0, got {duration}", kind="invalid_timer")
    _timer(visit, lambda: visit.store.db_now() + duration)


def _timer(visit: Visit, due_at: Callable[[], datetime]) -> None:
    index, recorded = visit.reserve(SLEEP)
    if recorded is not None:
        return  # it fired in this visit before (recorded when it did)
    waiting = _current(visit, index, WaitKind.TIMER)
    due = waiting.until if waiting is not None and waiting.until is not None else due_at()
    now = visit.store.db_now()
    if now >= due:
        visit.store.end_wait(visit.lease, visit.step, index, SLEEP, {"fired": due.isoformat()},
                             {"timer": "fired", "due": due.isoformat()})
        return
    waiting = WaitingFor(WaitKind.TIMER, visit.step, visit.visit, due, call_index=index)
    visit.store.park(visit.lease, visit.step, waiting.as_json(), due)
    left = (due - now).total_seconds()
    if wakes.arm_on_park and left < ARM_WITHIN_SWEEPS * durable_settings.DURABLE_SWEEP_SECONDS:  # before a sweep
        wakes.arm(visit.run_id, left)
    _parked(visit, waiting)


def wait_for_event(visit: Visit, names: str | Sequence[str], timeout: timedelta | None) -> Event | None:
    """The first event of `names` in the run's mailbox (arrived before the wait or after), consumed once; None
    when `timeout` passes first (by the database's clock)."""
    wanted = tuple(check_event_name(name) for name in ([names] if isinstance(names, str) else names))
    if not wanted:
        raise NonRetryableError("ctx.wait_for_event needs at least one event name", kind="invalid_wait")
    _refuse_undeclared(visit, wanted)
    index, recorded = visit.reserve(WAIT_FOR_EVENT)
    if recorded is not None:
        return _event_of(visit, recorded.result)
    waiting = _current(visit, index, WaitKind.EVENT)
    now = visit.store.db_now() if timeout is not None else None
    deadline = waiting.until if waiting is not None else None
    if deadline is None and now is not None and timeout is not None:
        deadline = now + timeout
    if deadline is not None and now is not None and now >= deadline:
        visit.store.end_wait(visit.lease, visit.step, index, WAIT_FOR_EVENT, {"timeout": deadline.isoformat()},
                             {"events": list(wanted), "timeout": deadline.isoformat()})
        return None
    description = WaitingFor(WaitKind.EVENT, visit.step, visit.visit, deadline, events=wanted, call_index=index)
    taken = visit.store.take_event_or_park(visit.lease, visit.step, index, WAIT_FOR_EVENT, wanted,
                                           description.as_json(), deadline)
    if taken is not None:
        fault_point(AFTER_EVENT_CONSUMED, operation_id=_call_id(visit, index), action=WAIT_FOR_EVENT)
        return _event_of(visit, taken)
    _parked(visit, description)


def _refuse_undeclared(visit: Visit, wanted: tuple[str, ...]) -> None:
    """A wait for a name its workflow does not declare would never end: the API refuses such events (400)."""
    workflow = registry.get(visit.workflow_name, visit.workflow_version)
    undeclared = workflow.undeclared_events(wanted)
    if undeclared:
        raise NonRetryableError(f"ctx.wait_for_event waits for {', '.join(map(repr, undeclared))}, which "
                                f"{workflow.name} v{workflow.version} does not declare (it declares "
                                f"{', '.join(map(repr, sorted(workflow.events)))}); such an event is refused",
                                kind="undeclared_event")


def _event_of(visit: Visit, result: dict[str, Any]) -> Event | None:
    """The event a wait took, its payload as the model the run's workflow declares for its name (if it does):
    checked against that model when it was sent, read back into it here, live and on replay alike."""
    if "event" not in result:
        return None
    event = Event.from_json(result["event"])
    model = registry.get(visit.workflow_name, visit.workflow_version).events.get(event.name)
    if model is None:
        return event
    try:
        return replace(event, payload=model.model_validate(event.payload))
    except ValidationError as exc:  # the model changed in code since the event was sent: say so, not a traceback
        raise NonRetryableError(f"event {event.id} ({event.name!r}) no longer fits {model.__name__}, the model "
                                f"{visit.workflow_name} v{visit.workflow_version} declares for it: "
                                f"{exc.errors(include_url=False)}", kind="event_payload_invalid") from None


def start_child(visit: Visit, workflow: str, input: dict[str, Any], business_key: str) -> ChildRun:
    """Start a run of `workflow` as this run's child, once per visit and key whatever crashes (invariant 19)."""
    refuse_unstorable(business_key, what=f"the business key of child run {workflow!r}", kind="payload_not_storable")
    index, recorded = visit.reserve(START_CHILD)
    if recorded is not None and "refused" in recorded.result:  # refused before: the same refusal, whatever now holds
        raise ChildKeyTaken(workflow, business_key, recorded.result.get("holder"), recorded.result["refused"])
    if recorded is not None:
        return ChildRun(**recorded.result)
    try:
        started = ChildRun(_start_child_run(visit, workflow, input, business_key), workflow, business_key)
    except ChildKeyTaken as taken:  # recorded, so a step that catches it takes the same path when run again
        visit.store.record_activity(visit.lease, visit.step, index, START_CHILD, {
            "refused": str(taken), "holder": taken.holder, "workflow": workflow, "business_key": business_key})
        raise
    fault_point(AFTER_CHILD_STARTED, operation_id=_call_id(visit, index), action=START_CHILD)
    visit.store.record_child(visit.lease, visit.step, index, START_CHILD,
                             {"run_id": started.run_id, "workflow": workflow, "business_key": business_key})
    return started


def _start_child_run(visit: Visit, workflow: str, input: dict[str, Any], business_key: str) -> str:
    """The child run's id: started now, or found by its start's key (the visit ran before). Started as the
    parent's creator's, so it is in the same scope (invariant 14: a tool's sweeper takes up its children)."""
    from durable.services import start_run  # the service starts every run: validation, contract, enqueue

    key = child_start_key(str(visit.run_id), visit.visit, workflow, business_key)
    with transaction.atomic():
        # The parent's row first, fenced: a cancel of the parent that committed before finds no RUNNING parent
        # (LeaseLost: no child starts); one that comes after waits for this commit and finds the child to cancel.
        visit.store.fence(visit.lease)
        creator = Run.objects.select_related("created_by").only("created_by").get(id=visit.run_id).created_by
        try:
            child, _ = start_run(workflow=workflow, input=input, business_key=business_key, idempotency_key=key,
                                 user=creator, source="parent", parent_run_id=visit.run_id)
        except Conflict as exc:  # the child workflow refuses a second active run for the key
            raise ChildKeyTaken(workflow, business_key, exc.extra.get("active_run"),
                                f"child run of {workflow} not started: {exc}") from None
        if child.parent_run_id != visit.run_id:
            # The child workflow answers a start with its active run for the key (return_existing): that run is
            # not this one's child, would not wake it when it ends, nor be cancelled with it.
            raise ChildKeyTaken(workflow, business_key, str(child.id), (
                f"child run of {workflow} not started: {workflow} already has an active run for business key "
                f"{business_key!r} (run {child.id}) that this run did not start; give each child a business key "
                "of its own, naming the parent's business (docs/workflows.md, \"Child business keys\")"))
    return str(child.id)


def wait_children(visit: Visit, children: Sequence[ChildRun]) -> list[Any]:
    """The outputs of `children`, in the order given, once every one has ended; ChildRunFailed (non-retryable)
    for the first that did not succeed."""
    ids = tuple(child.run_id for child in children)
    if not ids:
        return []
    index, recorded = visit.reserve(WAIT_CHILD)
    ended = recorded.result if recorded is not None else None
    if ended is None:
        description = WaitingFor(WaitKind.CHILD, visit.step, visit.visit, children=ids, call_index=index)
        ended = visit.store.children_or_park(visit.lease, visit.step, index, WAIT_CHILD, ids, description.as_json())
        if ended is None:
            _parked(visit, description)
        fault_point(AFTER_CHILDREN_ENDED, operation_id=_call_id(visit, index), action=WAIT_CHILD)
    for child in ended:
        if child["status"] != RunStatus.SUCCEEDED:
            raise ChildRunFailed(child["run_id"], child["workflow"], child["status"], child["error"])
    return [child["output"] for child in ended]


def _current(visit: Visit, index: int, kind: WaitKind) -> WaitingFor | None:
    """The wait this call started before the run was parked and woken, if it is this one: its due time holds."""
    if not visit.woke_from:
        return None
    waiting = WaitingFor.from_json(visit.woke_from)
    if (waiting.kind, waiting.step, waiting.visit, waiting.call_index) == (kind, visit.step, visit.visit, index):
        return waiting
    return None


def _call_id(visit: Visit, index: int) -> str:
    """A wait's call as a fault point names it (once per call: a file name): run, visit, call index."""
    return f"{visit.run_id}.{visit.visit}.{index}"


def _parked(visit: Visit, waiting: WaitingFor) -> NoReturn:
    metrics.wait_started(visit.workflow_name, visit.workflow_version, waiting.kind.value)
    log.info("run waits for %s", waiting.describe())
    raise Waiting(waiting.describe())
