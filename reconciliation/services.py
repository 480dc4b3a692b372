"""Operator resolution of UNKNOWN operations, the lookup that gathers its evidence, and the run's continuation."""
from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from durable import logs, metrics
from durable.audit import acting_user, audit
from durable.downstream import Downstream, get_downstream
from durable.engine.errors import classify
from durable.engine.ids import canonical_json, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.ledger import Reconciliation as Decision
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput, Unavailable
from durable.models import JournalEntry, Run, SideEffect
from durable.permissions import Caller
from durable.runtime import transitions
from durable.runtime.reconciler import Finding, look_up

log = logging.getLogger("durable.reconciliation")

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


def resolve_operation(*, operation_id: str, user: Caller | None, outcome: str, reason: str,
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
        _continue_run(run, operation_id)
    metrics.reconciled(row.action_name, f"resolved_{outcome}")
    with logs.bound(run_id=str(run.id), workflow=run.workflow_name, version=run.workflow_version, step=row.step,
                    operation_id=operation_id):
        log.info("operation resolved by %s: %s, now %s", getattr(user, "username", None), outcome, target.value)
    row.refresh_from_db()
    return row


def _continue_run(run: Run, operation_id: str) -> None:
    """Once no operation of the run is UNKNOWN, it goes back to work from its checkpoint; so do the forks held on
    this operation of their family (durable/forks.py), which then take the resolution."""
    held = list(Run.objects.filter(status=RunStatus.NEEDS_ATTENTION, error__operation_id=operation_id)
                .exclude(id=run.id).values_list("id", flat=True))
    if not SideEffect.objects.filter(run=run, status=Op.UNKNOWN).exists():
        held.append(run.id)
    transitions.move_all(held, RunStatus.PENDING, sources={RunStatus.NEEDS_ATTENTION}, error=None,
                         enqueued_at=timezone.now())


def why_no_lookup(operation: SideEffect, downstream: Downstream | None) -> str:
    """Why an operator cannot ask the operation's downstream for its record; empty when they can."""
    if downstream is None:
        return f"no adapter named {operation.downstream!r} is registered in this web process, so nothing can ask it"
    if downstream.capabilities.can_lookup:
        return ""
    if downstream.capabilities.honours_idempotency_keys:
        return (f"{downstream.name} cannot be looked up, but it honours Idempotency-Key {operation.operation_id}: "
                "sending again with that key cannot do it twice, so 'did not happen' with a retry is safe")
    return (f"{downstream.name} cannot be looked up and ignores idempotency keys: check its own records "
            "(its console, an export, the customer) and resolve with what you find there")


def ask_downstream(*, operation: SideEffect) -> Finding:
    """What the downstream says of the operation now, as evidence for a resolution; the ledger is not touched.

    Settling on a lookup stays the operator's call: invariant 4 lets only an operator move an UNKNOWN operation.
    """
    downstream = get_downstream(operation.downstream)
    why_not = why_no_lookup(operation, downstream)
    if downstream is None or why_not:
        return Finding(Decision.CANNOT_LOOK_UP, why_not)
    try:
        return look_up(operation, downstream)
    except Exception as exc:  # whatever the adapter raised, the operator can only ask again later
        log.warning("lookup of operation %s on %s failed", operation.operation_id, downstream.name, exc_info=True)
        verdict = classify(exc)
        raise Unavailable(f"{downstream.name} did not answer the lookup ({verdict.kind}: {verdict.message}); "
                          "nothing was changed, ask again in a moment") from exc
