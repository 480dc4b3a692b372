"""Fork from any checkpoint (docs/workflows.md, "Retry, resume or fork"): a new run from a chosen checkpoint of any
run, in any status, on its version or a newer one that takes over from there, optionally with an edited state.

The fork and its origin are one family (Run.family_root, its first run): the fork's operation ids are the family's
(durable.engine.ids.family_operation_id), so a business action a run of the family performed is answered from that
run's record and never sent again (docs/ledger-and-reconciliation.md, "A run's family"). The API and the console
call `fork_run`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from durable.audit import audit
from durable.engine.json_values import UnstorableJSON, check_storable
from durable.engine.topology import describe_changes, shapes_from_json
from durable.errors import Conflict, InvalidInput
from durable.models import Checkpoint, JournalEntry, Run
from durable.permissions import Caller
from durable.registry import UnknownWorkflow, registry
from durable.runtime import transitions
from durable.services import _creator, _field_errors, _index_for_search
from durable.store.checkpoints import state_at
from durable.workflow import Workflow


class NoSuchCheckpoint(Exception):
    """The run has no checkpoint of that seq (never had, or retention pruned it): the API's 404."""


@dataclass(frozen=True)
class Start:
    """Where the fork starts: its version, its first step and its state."""

    workflow: Workflow
    next_step: str
    state: dict[str, Any]


def fork_run(*, run_id: UUID | str, seq: int, reason: str, user: Caller | None, source: str,
             version: int | None = None, state: dict[str, Any] | None = None) -> Run:
    """A new run (the fork), PENDING, from checkpoint `seq` of run `run_id`, on `version` (by default the run's).
    Run.DoesNotExist or NoSuchCheckpoint for what is not there; InvalidInput (naming the field) for a missing reason,
    an unknown version or an edited state the state model refuses; Conflict for a checkpoint nothing runs from, or
    a version that cannot take over from it (naming the difference). Nothing is written unless it all holds."""
    if not reason.strip():
        raise InvalidInput({"reason": ["a fork needs a reason: it is audited"]})
    origin = Run.objects.get(id=run_id)
    checkpoint = Checkpoint.objects.filter(run=origin, seq=seq).first()
    if checkpoint is None:
        raise NoSuchCheckpoint(f"run {origin.id} has no checkpoint {seq}")
    if not checkpoint.next_step:
        raise Conflict(f"checkpoint {seq} is where the run ended: nothing runs from it; fork an earlier one",
                       current=origin.status)
    start = _start(origin, checkpoint, version)
    edited, difference = _edited(start, state)
    try:
        check_storable(edited)
    except UnstorableJSON as exc:
        raise InvalidInput({"state": [f"cannot be stored: {exc.detail}"]}) from None
    return _create(origin, seq, Start(start.workflow, start.next_step, edited), difference, user, source, reason)


def _target(origin: Run, version: int | None) -> Workflow:
    try:
        return registry.get(origin.workflow_name, version or origin.workflow_version)
    except UnknownWorkflow as exc:
        if version is None:
            raise Conflict(f"{exc}: the run's own version is no longer registered; fork onto a newer one",
                           current=origin.status) from None
        raise InvalidInput({"version": [str(exc)]}) from None


def _start(origin: Run, checkpoint: Checkpoint, version: int | None) -> Start:
    """The same version, or a newer one with the same topology or a migration (the rule of durable/versions.py:
    a step mapped for the checkpoint's position and a state that fits) from the run's."""
    target = _target(origin, version)
    state = dict(state_at(origin.id, checkpoint.seq))  # whole: a difference's row holds none
    if target.version == origin.workflow_version or target.fingerprint == origin.topology_fingerprint:
        return Start(target, checkpoint.next_step, state)
    if target.version < origin.workflow_version:
        raise Conflict(f"v{target.version} is older than the run's v{origin.workflow_version}: a fork goes to the "
                       "same version or a newer one", current=origin.status)
    migration = target.migration_from(origin.workflow_version)
    if migration is None:
        changes = "; ".join(describe_changes(shapes_from_json(origin.topology), target.topology))
        raise Conflict(f"{target.name} v{target.version} differs from v{origin.workflow_version} ({changes}) and "
                       f"declares no migration from it", current=origin.status)
    new_step = migration.step_map.get(checkpoint.next_step)
    if new_step is None:
        raise Conflict(f"{target.name} v{target.version}'s migration maps no step for checkpoint {checkpoint.seq}'s "
                       f"position {checkpoint.next_step!r}", current=origin.status)
    try:
        state = target.state.model_validate(migration.upcast(state)).model_dump(mode="json")
    except ValidationError as exc:
        raise Conflict(f"the checkpoint's state does not fit v{target.version}'s state model: {exc}",
                       current=origin.status) from None
    return Start(target, new_step, state)


def _edited(start: Start, state: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fork's state (the edit, validated by the state model) and what the edit changed: {field: [was, is]}."""
    if state is None:
        return start.state, {}
    try:
        edited = start.workflow.state.model_validate(state).model_dump(mode="json")
    except ValidationError as exc:
        raise InvalidInput({f"state.{field}" if field != "__root__" else "state": messages
                            for field, messages in _field_errors(exc).items()}) from None
    changed = {key: [start.state.get(key), edited.get(key)] for key in sorted(set(start.state) | set(edited))
               if start.state.get(key) != edited.get(key)}
    return edited, changed


def _create(origin: Run, seq: int, start: Start, difference: dict[str, Any], user: Caller | None, source: str,
            reason: str) -> Run:
    target, now = start.workflow, timezone.now()
    family_root = origin.family_root or origin.id
    forked = {"origin": str(origin.id), "seq": seq, "version": target.version, "family_root": str(family_root)}
    with transaction.atomic():
        run = transitions.fork(
            **target.contract(), **target.budget_fields(), business_key=origin.business_key, input=origin.input,
            next_step=start.next_step, state=start.state, schema_version=target.checkpoint_schema_version,
            created_by_id=_creator(user, None),
            enqueued_at=now, priority=origin.priority, forked_from=origin, forked_at_seq=seq, family_root=family_root)
        _index_for_search(run, target, target.input.model_construct(**(origin.input or {})))
        by = getattr(user, "username", None)
        JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.OPERATOR, step=start.next_step, name="forked_from",
                                    visit=0, detail={**forked, "reason": reason, "state_changed": difference, "by": by},
                                    created_at=now)
        JournalEntry.objects.create(run=origin, kind=JournalEntry.Kind.OPERATOR, step=start.next_step, name="forked",
                                    visit=seq, detail={"fork": str(run.id), "seq": seq, "reason": reason, "by": by},
                                    fencing_token=origin.fencing_token, created_at=now)
        audit(user=user, action="fork_run", run=run, source=source, status_before="", status_after=run.status,
              reason=reason.strip(), detail={**forked, "state_changed": difference})
    return run
