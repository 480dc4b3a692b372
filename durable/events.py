"""Events from outside (invariant 18): a run's mailbox, filled by the API, a host's webhook view or its code.

`send_event` puts the event in the run's mailbox, in arrival order, once per Idempotency-Key, and wakes the run
if it waits for that name; a wait consumes it once (durable.runtime.waits). Sent to a run by id, or by what a
webhook knows: the workflow and the business key of its active run.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from durable import metrics
from durable.audit import acting_user, audit
from durable.conf import durable_settings
from durable.engine.ids import request_hash
from durable.engine.json_values import UnstorableJSON, check_storable
from durable.engine.states import TERMINAL, RunStatus
from durable.engine.waits import WaitingFor, check_event_name
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import JournalEntry, Run, RunEvent
from durable.permissions import Caller
from durable.registry import UnknownWorkflow, registry
from durable.runtime import wakes
from durable.workflow import Workflow

SEND_EVENT = "durable.send_event"


@dataclass(frozen=True)
class Delivery:
    """What a send did: the event (the one kept before, when its Idempotency-Key was seen), and whether it woke
    the run."""

    event: RunEvent
    created: bool
    woke: bool

    def as_json(self) -> dict[str, Any]:
        event = self.event
        return {"id": event.id, "run_id": str(event.run_id), "name": event.name, "received_at": event.received_at,
                "duplicate": not self.created, "woke_run": self.woke, "consumed": event.consumed_at is not None}


def send_event(*, name: str, payload: Any = None, run_id: UUID | str | None = None, workflow: str | None = None,
               business_key: str | None = None, idempotency_key: str | None = None, user: Caller | None = None,
               sender: str = "", source: str = "python") -> Delivery:
    """Send an event to a run (by `run_id`, or by `workflow` and `business_key`); see docs/workflows.md.

    With `user`, the user needs durable.send_event (Forbidden otherwise); without, the caller is code the host
    trusts and `sender` names it. InvalidInput (400) names the field; Conflict (409) when the run has ended or
    the business key has several active runs; Run.DoesNotExist (404) when no run matches.
    """
    if user is not None and not user.has_perm(SEND_EVENT):
        raise Forbidden("sending events needs the durable.send_event permission", action="send_event")
    name = _checked_name(name)
    payload = _checked_payload(payload)
    run = _target(run_id, workflow, business_key, idempotency_key)
    payload = _validated(run, name, payload)
    who = sender or _sender_of(user, source)
    digest = request_hash({"name": name, "payload": payload})
    with transaction.atomic():
        run = Run.objects.select_for_update().get(id=run.id)  # after a parking visit, or before it: see wakes
        kept = _kept(run, idempotency_key, digest)
        if kept is not None:  # first: a sender retrying after the run took the event and ended gets it back
            metrics.event_received(run.workflow_name, duplicate=True)
            return Delivery(kept, created=False, woke=False)
        if RunStatus(run.status) in TERMINAL:
            raise Conflict(f"the run has ended ({run.status}); it takes no more events", current=run.status)
        event = _store(run, name, payload, idempotency_key, digest, who, user)
        woke = _waits_for(run, name) and wakes.wake(run.id)
        JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.EVENT_RECEIVED, step=run.current_step,
                                    name=name, fencing_token=run.fencing_token, created_at=event.received_at,
                                    detail={"event": event.id, "sender": who, "woke_run": woke})
        audit(user=user, action="send_event", run=run, source=source, status_before=run.status,
              status_after=RunStatus.PENDING if woke else run.status,
              detail={"event": event.id, "name": name, "sender": who, "idempotency_key": idempotency_key or ""})
    metrics.event_received(run.workflow_name, duplicate=False)
    return Delivery(event, created=True, woke=woke)


def _waits_for(run: Run, name: str) -> bool:
    waiting_for = run.waiting_for
    return run.status == RunStatus.WAITING and isinstance(waiting_for, dict) and \
        WaitingFor.from_json(waiting_for).woken_by_event(name)


def _checked_name(name: Any) -> str:
    try:
        return check_event_name(name)
    except ValueError as exc:
        raise InvalidInput({"name": [str(exc)]}) from None


def _checked_payload(payload: Any) -> Any:
    try:
        check_storable(payload)
    except UnstorableJSON as problem:
        raise InvalidInput({"payload": [f"{problem.path or 'payload'}: {problem.detail}"]}) from None
    size = len(json.dumps(payload))
    if size > durable_settings.DURABLE_EVENT_MAX_BYTES:
        raise InvalidInput({"payload": [f"is {size} bytes as JSON; at most {durable_settings.DURABLE_EVENT_MAX_BYTES}"
                                        " (DURABLE_EVENT_MAX_BYTES)"]})
    return payload


def _target(run_id: UUID | str | None, workflow: str | None, business_key: str | None,
            idempotency_key: str | None) -> Run:
    if run_id is not None:
        return Run.objects.get(id=run_id)
    if not workflow or business_key is None:
        raise InvalidInput({"business_key": ["give the run, or the workflow and the business key of its run"]})
    if idempotency_key:  # sent before: the run that has it, even if it ended and the key has a newer run now
        kept = RunEvent.objects.filter(run__workflow_name=workflow, run__business_key=business_key,
                                       idempotency_key=idempotency_key).select_related("run").order_by("-id").first()
        if kept is not None:
            return kept.run
    active = list(Run.objects.filter(workflow_name=workflow, business_key=business_key)
                  .exclude(status__in=sorted(TERMINAL)).order_by("created_at")[:11])
    if not active:
        if Run.objects.filter(workflow_name=workflow, business_key=business_key).exists():
            latest = Run.objects.filter(workflow_name=workflow, business_key=business_key).order_by("-created_at")[0]
            raise Conflict(f"the {workflow} run for business key {business_key!r} has ended ({latest.status})",
                           current=latest.status, run_id=str(latest.id))
        raise Run.DoesNotExist(f"no {workflow} run for business key {business_key!r}")
    if len(active) > 1:
        raise Conflict(f"{workflow} has several active runs for business key {business_key!r}: send the event to "
                       "one of them by its id", runs=[str(run.id) for run in active])
    return active[0]


def _validated(run: Run, name: str, payload: Any) -> Any:
    """The payload checked against the model the run's workflow declares for the event name, if it does; a name
    the workflow does not declare, when it declares its events, is refused (it would wait in the mailbox forever)."""
    try:
        workflow: Workflow | None = registry.get(run.workflow_name, run.workflow_version)
    except UnknownWorkflow:
        workflow = None
    declared = workflow.events if workflow is not None else {}
    if workflow is not None and workflow.undeclared_events([name]):
        raise InvalidInput({"name": [f"{run.workflow_name} v{run.workflow_version} takes no event {name!r}; it "
                                     f"declares {', '.join(repr(known) for known in sorted(declared))}"]})
    model = declared.get(name)
    if model is None:
        return payload
    try:
        return model.model_validate(payload).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidInput({f"payload.{'.'.join(str(part) for part in error['loc'])}" if error["loc"] else "payload":
                            [error["msg"]] for error in exc.errors()}) from None


def _kept(run: Run, idempotency_key: str | None, digest: str) -> RunEvent | None:
    if not idempotency_key:
        return None
    kept = RunEvent.objects.filter(run=run, idempotency_key=idempotency_key).first()
    if kept is not None and kept.request_hash != digest:
        raise Conflict("this Idempotency-Key was sent before with another event name or payload; nothing was "
                       "sent", event_id=kept.id)
    return kept


def _store(run: Run, name: str, payload: Any, idempotency_key: str | None, digest: str, sender: str,
           user: Caller | None) -> RunEvent:
    try:
        with transaction.atomic():
            return RunEvent.objects.create(run=run, name=name, payload=payload, idempotency_key=idempotency_key,
                                           request_hash=digest, sender=sender[:200], sent_by=acting_user(user),
                                           received_at=timezone.now())
    except IntegrityError:  # the same key, sent at the same moment: the run's row lock makes this rare
        raise Conflict("an event with this Idempotency-Key is being sent at this moment; send it again") from None


def _sender_of(user: Caller | None, source: str) -> str:
    actor = acting_user(user)
    return f"{source}:{actor.get_username()}" if actor is not None else source
