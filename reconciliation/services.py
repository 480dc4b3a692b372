"""Operator resolution of UNKNOWN operations, audited, and the run's continuation after it."""
from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from durable import dispatch
from durable.engine.ids import canonical_json, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.services import Conflict, InvalidInput, acting_user, audit

SUCCEEDED, DID_NOT_HAPPEN = "succeeded", "did_not_happen"
RETRY, FAIL = "retry", "fail"


def _target(outcome: str, external_ref: str, follow_up: str, reason: str) -> Op:
    errors: dict[str, list[str]] = {}
    if not reason.strip():
        errors["reason"] = ["say what evidence the resolution rests on"]
    if outcome == SUCCEEDED and not external_ref.strip():
        errors["external_ref"] = ["required when the operation succeeded: the downstream's reference"]
    if outcome == DID_NOT_HAPPEN and follow_up not in (RETRY, FAIL):
        errors["follow_up"] = ["choose 'retry' (send again with the same key) or 'fail' (fail the step)"]
    if outcome not in (SUCCEEDED, DID_NOT_HAPPEN):
        errors["outcome"] = ["choose 'succeeded' or 'did_not_happen'"]
    if errors:
        raise InvalidInput(errors)
    if outcome == SUCCEEDED:
        return Op.SUCCEEDED
    return Op.FAILED_RETRYABLE if follow_up == RETRY else Op.FAILED_FINAL


def resolve_operation(*, operation_id: str, user: AbstractBaseUser | None, outcome: str, reason: str,
                      external_ref: str = "", result: dict[str, Any] | None = None, follow_up: str = "",
                      source: str) -> SideEffect:
    """Settle an UNKNOWN operation by hand; the run continues from its checkpoint once none is left."""
    target = _target(outcome, external_ref, follow_up, reason)
    row = SideEffect.objects.get(operation_id=operation_id)
    if row.status != Op.UNKNOWN:
        raise Conflict(f"operation {operation_id} is {row.status}, not UNKNOWN: only UNKNOWN operations are "
                       "resolved by hand, and this one needs no resolution", current=row.status)
    now = timezone.now()
    fields: dict[str, Any] = {"status": target, "resolved_by": acting_user(user), "resolved_at": now,
                              "resolution_evidence": reason, "updated_at": now}
    if target == Op.SUCCEEDED:
        result = result or {}
        fields.update(external_ref=external_ref, result_json=result, response_hash=sha256_hex(canonical_json(result)))
    with transaction.atomic():
        if not SideEffect.objects.filter(operation_id=operation_id, status=Op.UNKNOWN).update(**fields):
            current = SideEffect.objects.values_list("status", flat=True).get(operation_id=operation_id)
            raise Conflict(f"operation {operation_id} was resolved meanwhile (now {current})", current=current)
        detail = {"operation_id": operation_id, "outcome": outcome, "follow_up": follow_up,
                  "external_ref": external_ref, "status_after": target.value}
        run = Run.objects.get(id=row.run_id)
        audit(user=user, action="resolve_operation", run=run, operation_id=operation_id, source=source,
              status_before=Op.UNKNOWN, status_after=target, reason=reason, detail=detail)
        JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.OPERATOR, step=row.step, name=row.action_name,
                                    detail={**detail, "by": getattr(user, "username", None), "reason": reason},
                                    fencing_token=run.fencing_token, created_at=now)
        _continue_run(run)
    row.refresh_from_db()
    return row


def _continue_run(run: Run) -> None:
    """Once no operation of the run is UNKNOWN, it goes back to work from its checkpoint."""
    if SideEffect.objects.filter(run=run, status=Op.UNKNOWN).exists():
        return
    resumed = Run.objects.filter(id=run.id, status=RunStatus.NEEDS_ATTENTION).update(
        status=RunStatus.PENDING, error=None, enqueued_at=timezone.now(), updated_at=timezone.now())
    if resumed:
        dispatch.enqueue_on_commit(run.id)
