"""The side-effect boundary: one side-effecting call, Prepare -> Execute -> Commit, before the step's checkpoint.

Read top to bottom, the phases come in the order a call crosses them (invariants 2 and 3,
docs/invariants.md; the ledger in docs/ledger-and-reconciliation.md):

1. Prepare: the action checked against the step's declared side effects and the payload as storable, then
   the operation id, sha256("run_id:action:business_key")[:32], a fork's by its family's first run (the ledger's key and the
   downstream's Idempotency-Key), the request hash, and the ledger row, PENDING. Nothing is sent. The
   same id asked with another request is refused: an OperationConflict the step may catch, or, when the visit
   that prepared it runs again on changed code, a replay mismatch that holds the run (docs/replay-contract.md).
2. Re-enter: the row's status says what this call does. SUCCEEDED returns the recorded result (a
   duplicate prevented); FAILED_FINAL fails the step; UNKNOWN waits for an operator; STARTED, the crash
   window, is reconciled (durable/runtime/reconciler.py), never blindly sent again; PENDING and
   FAILED_RETRYABLE go on.
3. Execute: the row is committed STARTED, and only then is the downstream called, under a kept lease.
4. Commit: its answer is recorded SUCCEEDED, or its failure classified (retry, fail, or UNKNOWN when it
   may have happened). The step returns the result; the executor then writes the checkpoint.

What each status leads to is decided by pure rules (durable/engine/ledger.py); the fenced writes that move
a row are durable/runtime/ledger.py's; a tool may act as a crash would at each phase's end
(durable/runtime/fault_points.py).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NoReturn
from uuid import UUID

from durable import logs, metrics, tracing
from durable.downstream import Downstream, DownstreamOutcome, classify_error
from durable.engine.errors import (
    LeaseLost,
    NeedsAttention,
    NonRetryableError,
    OperationConflict,
    RetryableError,
    is_ambiguous,
    refuse_unstorable,
)
from durable.engine.ids import family_operation_id, request_hash
from durable.engine.ledger import OperationStatus as Op
from durable.engine.ledger import Reentry, after_failed_call, in_family, on_reentry
from durable.engine.replay import Mismatch, ReplayMismatch, payload_difference
from durable.models import SideEffect
from durable.runtime import ledger
from durable.runtime.fault_points import AFTER_COMMIT, AFTER_DOWNSTREAM, AFTER_PREPARE, AFTER_STARTED, fault_point
from durable.runtime.heartbeat import lease_kept
from durable.runtime.reconciler import reconcile_started
from durable.runtime.visit import Visit, to_json
from durable.store import Lease, RunStore

log = logging.getLogger("durable.side_effects")  # the name operators filter on, kept across the move to runtime/


@tracing.side_effect
def perform(visit: Visit, *, action: str, business_key: str, downstream: Downstream,
            payload: dict[str, Any]) -> dict[str, Any]:
    """Make the external action happen once, returning its recorded result."""
    begun = begin(visit, action=action, business_key=business_key, downstream=downstream, payload=payload)
    if not isinstance(begun, Send):
        return begun
    store, lease = visit.store, visit.lease
    begun.start(store, lease)
    with logs.bound(operation_id=begun.row.operation_id):
        try:
            with lease_kept(store, lease) as kept:  # no second worker sends while this request may be in flight
                outcome = kept.call(begun.call)
        except LeaseLost:
            raise  # the run is another worker's now: it settles the STARTED row, this one writes nothing
        except Exception as exc:
            settle_failure(store, lease, begun, exc)
        return finish(store, lease, begun, outcome)


def begin(visit: Visit, *, action: str, business_key: str, downstream: Downstream,
          payload: dict[str, Any]) -> dict[str, Any] | Send:
    """Check, prepare and re-enter: the recorded result if nothing is to be sent, else the Send still to start
    and make.

    ctx.parallel begins each of its side effects on the step's thread, then starts and sends them at once.
    """
    payload = _checked(visit, action, business_key, payload)
    try:
        row = prepare(visit.store, visit.lease, step=visit.step, action=action, business_key=business_key,
                      downstream=downstream.name, payload=payload, asked_in_visit=visit.cursor.prepared,
                      family_root=visit.family_root)
    except ReplayMismatch as changed:  # kept on the visit: a step that catches it is held all the same
        raise visit.cursor.mismatched(changed.mismatch) from None
    with logs.bound(operation_id=row.operation_id):
        fault_point(AFTER_PREPARE, operation_id=row.operation_id, action=action)
        return _reenter(visit.store, visit.lease, row, downstream)


def _checked(visit: Visit, action: str, business_key: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as recorded, once the step declares the action and what its code chose can be stored."""
    if action not in visit.declared_side_effects:
        raise NonRetryableError(
            f"step {visit.step!r} performs side effect {action!r} but does not declare it; "
            f"add side_effects=[{action!r}] to its @step (it is part of the topology fingerprint)",
            kind="undeclared_side_effect",
        )
    payload = to_json(payload)
    # Chosen by workflow code before anything is prepared or sent: refused, so nothing reaches the ledger.
    refuse_unstorable(business_key, what=f"the business key of side effect {action!r}", kind="payload_not_storable")
    refuse_unstorable(payload, what=f"the payload of side effect {action!r}", kind="payload_not_storable")
    return payload


# -- 1. Prepare ------------------------------------------------------------------------------------------------

def prepare(store: RunStore, lease: Lease, *, step: str, action: str, business_key: str, downstream: str,
            payload: dict[str, Any], asked_in_visit: set[str] | None = None,
            family_root: UUID | None = None) -> SideEffect:
    """The id, the request hash and the ledger row (created PENDING, or found as an earlier attempt left it).

    `asked_in_visit`: the operations this execution of the visit prepared so far (it adds this one). A row this
    visit prepared in an earlier execution, asked now with another request, is a replay mismatch; asked again
    within one execution (a model asking twice) or by another visit (a loop), an OperationConflict the step may
    catch.

    `family_root`: the first run of the fork's family (Run.family_root): the id is the family's, so a row another run
    of the family made is found, and answered by its status (`_reenter`)."""
    op_id = family_operation_id(str(lease.run_id), str(family_root) if family_root else None, action, business_key)
    req_hash = request_hash(payload)
    row, created = store.prepare_operation(lease, {
        "operation_id": op_id, "run_id": lease.run_id, "step": step, "visit": lease.seq, "action_name": action,
        "business_key": business_key, "downstream": downstream, "request_hash": req_hash, "payload": payload,
    })
    if not created and row.request_hash != req_hash:
        if (asked_in_visit is not None and op_id not in asked_in_visit and row.run_id == lease.run_id
                and (row.visit, row.step) == (lease.seq, step)):
            raise _replay_mismatch(row, payload)
        raise OperationConflict(
            f"operation {op_id} ({action} for {business_key}) was prepared with request hash {row.request_hash} "
            f"and is now asked with {req_hash}; a changed request needs a new business key"
        )
    if asked_in_visit is not None:
        asked_in_visit.add(op_id)
    return row


def _replay_mismatch(row: SideEffect, payload: dict[str, Any]) -> ReplayMismatch:
    """This very visit prepared the operation before with another request: it ran again on changed code (or code
    that is not deterministic). Not a conflict the step may catch and go on from: the run is held on its version
    with the difference shown, and goes on once the code asks what it recorded (docs/replay-contract.md)."""
    recorded, new = payload_difference(row.payload, payload)
    return ReplayMismatch(Mismatch(row.step, row.visit or 0, "side_effect",
                                   f"side effect {row.action_name!r} for {row.business_key}", recorded, new))


# -- 2. Re-enter: what the row's status says (invariant 3) -----------------------------------------------------

def _reenter(store: RunStore, lease: Lease, row: SideEffect, downstream: Downstream) -> dict[str, Any] | Send:
    action = row.action_name
    if row.run_id != lease.run_id:  # another run of the fork's family made it: never sent again from here
        return _answered_in_family(store, lease, row)
    reentry = on_reentry(row.status, resolved_by_hand=row.status_set_by_operator)
    if reentry is Reentry.TAKE_RESOLUTION:
        log.info("%s was resolved by an operator as succeeded (%s): taking what they recorded", action,
                 row.external_ref)
        return _result(row.result_json, row.external_ref)
    if reentry is Reentry.RETURN_RECORDED:
        ledger.count_prevented_duplicate(store, lease, row)
        metrics.duplicate_prevented(action)
        log.info("%s already succeeded (%s): duplicate prevented, nothing sent", action, row.external_ref)
        return _result(row.result_json, row.external_ref)
    if reentry is Reentry.FAIL_STEP:
        raise NonRetryableError(f"operation {row.operation_id} ({action}) failed for good: {row.last_error}",
                                kind="side_effect_failed")
    if reentry is Reentry.NEEDS_ATTENTION:
        raise _needs_attention(row)
    if reentry is Reentry.RECONCILE:
        settled = reconcile_started(store, lease, row, downstream)
        if settled.unknown:
            raise _needs_attention(row)
        if settled.outcome is not None:
            return _result(settled.outcome.result, settled.outcome.external_ref)
        return Send(row, downstream, may_have_happened=settled.may_have_happened)
    return Send(row, downstream)


def _answered_in_family(store: RunStore, lease: Lease, row: SideEffect) -> dict[str, Any]:
    """A fork asks what a run of its family did: its recorded result ("done in run <origin>", nothing sent), its
    final failure, a hold while it is UNKNOWN there (the operator's resolution there releases the fork too), or a
    retry later while that run may still send it."""
    reentry = in_family(row.status, resolved_by_hand=row.status_set_by_operator)
    what = f"operation {row.operation_id} ({row.action_name} for {row.business_key})"
    if reentry is Reentry.FAIL_STEP:
        raise NonRetryableError(f"{what} failed for good in run {row.run_id}: {row.last_error}",
                                kind="side_effect_failed")
    if reentry is Reentry.NEEDS_ATTENTION:
        raise NeedsAttention(f"{what} is UNKNOWN in run {row.run_id} of this run's family: an operator must say "
                             "whether it happened; resolving it there lets this run go on", operation_id=row.operation_id)
    if reentry is Reentry.WAIT_FOR_FAMILY:
        raise RetryableError(f"{what} is {row.status} in run {row.run_id} of this run's family, which may still send "
                             "it: asked again later, never sent from here", kind="in_flight_in_family")
    if reentry is Reentry.RETURN_RECORDED:
        ledger.count_prevented_duplicate(store, lease, row)
        metrics.duplicate_prevented(row.action_name)
    log.info("%s was done in run %s (%s): nothing sent", row.action_name, row.run_id, row.external_ref)
    return _result(row.result_json, row.external_ref)


# -- 3. Execute: STARTED is committed, then the downstream is called -------------------------------------------

@dataclass
class Send:
    """An operation to send: `start` commits it STARTED (on the step's thread), then `call` sends it (on any
    thread, under a kept lease), then `finish` or `settle_failure` records the answer (on the step's thread)."""

    row: SideEffect
    downstream: Downstream
    may_have_happened: bool = False  # an earlier attempt may have performed it: re-sent with the same key

    def start(self, store: RunStore, lease: Lease) -> None:
        row, downstream = self.row, self.downstream
        sent_before = row.attempts > 0
        ledger.mark_started(store, lease, row)
        if sent_before and downstream.capabilities.honours_idempotency_keys:
            metrics.idempotency_key_hit(row.action_name)
            log.info("%s sent to %s again with the same Idempotency-Key (attempt %d)", row.action_name,
                     downstream.name, row.attempts)
        fault_point(AFTER_STARTED, operation_id=row.operation_id, action=row.action_name)

    @tracing.sending
    def call(self) -> DownstreamOutcome:
        """The downstream call itself: no database write, so it may run on a thread of ctx.parallel's pool."""
        return self.downstream.execute(self.row.operation_id, self.row.business_key, self.row.payload or {})


# -- 4. Commit: the answer recorded, or the failure classified -------------------------------------------------

def finish(store: RunStore, lease: Lease, send: Send, outcome: DownstreamOutcome) -> dict[str, Any]:
    """The downstream answered: commit its answer SUCCEEDED and return what the step gets."""
    with logs.bound(operation_id=send.row.operation_id):
        fault_point(AFTER_DOWNSTREAM, operation_id=send.row.operation_id, action=send.row.action_name)
        return _commit(store, lease, send.row, send.downstream, outcome)


def settle_failure(store: RunStore, lease: Lease, send: Send, exc: Exception) -> NoReturn:
    """The downstream call raised: record what that means and raise the error the step's retry policy reads."""
    with logs.bound(operation_id=send.row.operation_id):
        _settle_failure(store, lease, send.row, send.downstream, exc, may_have_happened=send.may_have_happened)


def _commit(store: RunStore, lease: Lease, row: SideEffect, downstream: Downstream,
            outcome: DownstreamOutcome) -> dict[str, Any]:
    ledger.commit_success(store, lease, row, outcome)
    log.info("%s succeeded on %s: %s", row.action_name, downstream.name, outcome.external_ref)
    fault_point(AFTER_COMMIT, operation_id=row.operation_id, action=row.action_name)
    return _result(outcome.result, outcome.external_ref)


def _result(result: dict[str, Any] | None, external_ref: str) -> dict[str, Any]:
    """What the step gets, the same live and on re-entry: the result plus the external reference
    (which is all there is when an operator resolved the operation without a result)."""
    return {**(result or {}), "external_ref": external_ref}


def _settle_failure(store: RunStore, lease: Lease, row: SideEffect, downstream: Downstream, exc: Exception, *,
                    may_have_happened: bool) -> NoReturn:
    """Record what a failed call means. Raises instead of returning where the error changes.

    `may_have_happened`: this call re-sent, with the same key, an operation an earlier attempt may
    have performed (a crash or an ambiguous answer left it STARTED).
    """
    verdict = classify_error(downstream, exc)  # the adapter's own reading of its errors
    ambiguous = is_ambiguous(exc)
    status = after_failed_call(answered=not ambiguous, retryable=verdict.retryable,
                               may_have_happened=may_have_happened, capabilities=downstream.capabilities)
    if status in (Op.FAILED_RETRYABLE, Op.FAILED_FINAL):
        ledger.mark_failed(store, lease, row, retryable=verdict.retryable, error=verdict.as_json())
        # The step's retry policy must read the error as the adapter did, not by durable's HTTP rules.
        error_type = RetryableError if verdict.retryable else NonRetryableError
        extra = {"retry_after": verdict.retry_after} if verdict.retryable else {}
        raise error_type(f"{row.action_name} on {downstream.name}: {verdict.message}", kind=verdict.kind,
                         **extra) from exc
    if status is Op.STARTED:
        # The retry re-enters it and the reconciler re-sends it with the same key, or looks it up first.
        raise RetryableError(f"{row.action_name} on {downstream.name} may have happened ({verdict.message}); "
                             "it will be reconciled before anything is sent again",
                             kind="ambiguous" if ambiguous else verdict.kind) from exc
    ledger.mark_unknown(store, lease, row, evidence=f"{verdict.kind} after the request was sent: {verdict.message}; "
                                                    f"{downstream.name} has no idempotency keys and no lookup")
    raise _needs_attention(row) from exc


def _needs_attention(row: SideEffect) -> NeedsAttention:
    return NeedsAttention(f"operation {row.operation_id} ({row.action_name} for {row.business_key}) is UNKNOWN: "
                          "an operator must say whether it happened", operation_id=row.operation_id)


# -- After the boundary: a step that gives up ------------------------------------------------------------------

def mark_unsettled_unknown(store: RunStore, lease: Lease, reason: str) -> list[str]:
    """A run about to fail must not leave a possibly-performed operation looking failed.

    Operations still STARTED (the last answer was ambiguous) become UNKNOWN instead, so the
    run waits for an operator rather than failing with an effect that may have happened.
    """
    marked = []
    for row in SideEffect.objects.filter(run_id=lease.run_id, status=Op.STARTED):
        ledger.mark_unknown(store, lease, row, evidence=f"{reason}; the last attempt's outcome is not known")
        marked.append(row.operation_id)
    return marked
