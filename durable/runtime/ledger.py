"""The side-effect ledger's moves: a row from one status to the next, each fenced by the run's lease.

The boundary that calls them in order (Prepare, which creates the row, then STARTED, SUCCEEDED or a
failure) is durable/runtime/side_effects.py; which moves are allowed is durable/engine/ledger.py's rule.
Each goes through the run store: one statement on Postgres, one transaction elsewhere."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F

from durable import metrics
from durable.downstream import REPAIRED, DownstreamOutcome, with_repair_noted
from durable.engine.errors import RetryableError
from durable.engine.ids import canonical_json, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.notifications import EventKind
from durable.models import JournalEntry, SideEffect
from durable.signals import operator_event
from durable.store import Lease, RunStore

log = logging.getLogger("durable.ledger")  # the name operators filter on, kept across the move to runtime/


class StaleOperation(RetryableError):
    """The row was not in the status this write expected: the sweeper's reconciler moved it.

    Retryable: the step runs again and its re-entry acts on the operation's new status.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="concurrent_ledger_change")


def _move(store: RunStore, lease: Lease, row: SideEffect, sources: set[Op], target: Op, journal: dict[str, Any] | None,
          *, count_attempt: bool = False, **fields: Any) -> None:
    detail = None if journal is None else {"operation_id": row.operation_id, "status": target.value, **journal}
    moved_at = store.move_operation(lease, row, frozenset(sources), target, journal=detail, count_attempt=count_attempt,
                                    **fields)
    if moved_at is None:
        raise StaleOperation(f"operation {row.operation_id} is no longer in {sorted(sources)}")
    # The row is what the conditional UPDATE made it: no need to read it back.
    row.status, row.updated_at, row.attempts = target, moved_at, row.attempts + count_attempt
    for name, value in fields.items():
        setattr(row, name, value)


def mark_started(store: RunStore, lease: Lease, row: SideEffect) -> None:
    """Committed before the downstream is called: from here on, a crash is a STARTED row."""
    _move(store, lease, row, {Op.PENDING, Op.STARTED, Op.FAILED_RETRYABLE}, Op.STARTED, None, count_attempt=True)


def commit_success(store: RunStore, lease: Lease, row: SideEffect, outcome: DownstreamOutcome, *,
                   evidence: str = "") -> None:
    evidence = with_repair_noted(evidence, outcome)
    if outcome.repaired:
        log.warning("operation %s (%s): %s", row.operation_id, row.action_name, REPAIRED)
    result = canonical_json(outcome.result)
    _move(store, lease, row, {Op.STARTED}, Op.SUCCEEDED,
          {"external_ref": outcome.external_ref, **({"evidence": evidence} if evidence else {})},
          external_ref=outcome.external_ref, result_json=outcome.result, response_hash=sha256_hex(result),
          last_error=None)


def mark_failed(store: RunStore, lease: Lease, row: SideEffect, *, retryable: bool, error: dict[str, Any]) -> None:
    target = Op.FAILED_RETRYABLE if retryable else Op.FAILED_FINAL
    _move(store, lease, row, {Op.STARTED}, target, {"error": error}, last_error=error)


def mark_unknown(store: RunStore, lease: Lease, row: SideEffect, *, evidence: str, together: Sequence[str] = (),
                 notify: bool = True) -> None:
    """The one place a worker marks an operation UNKNOWN (the sweeper has its own, reconciliation.sweeper).
    What one interruption left in doubt is told once: the first operation's notice names the others (`together`),
    which are marked with `notify=False`."""
    with transaction.atomic():  # the event is recorded with the move (one statement on Postgres otherwise)
        _move(store, lease, row, {Op.STARTED}, Op.UNKNOWN, {"evidence": evidence}, last_error={"evidence": evidence})
        if notify:
            operator_event.send(mark_unknown, kind=EventKind.OPERATION_UNKNOWN, run_id=row.run_id,
                                subject=row.operation_id, occurrence=row.attempts,
                                detail=unknown_notice(row, together))
    metrics.operation_unknown(row.action_name)
    log.warning("operation %s (%s) is UNKNOWN: %s", row.operation_id, row.action_name, evidence)


def unknown_notice(row: SideEffect, together: Sequence[str], **more: str) -> dict[str, Any]:
    """What the notice of an operation found UNKNOWN says: with the operations the same interruption left in
    doubt, so that an operator resolves them in one round."""
    also = {"unknown_with_it": ", ".join(together)} if together else {}
    return {**row.notice, **more, **also}


def count_prevented_duplicate(store: RunStore, lease: Lease, row: SideEffect) -> None:
    with transaction.atomic():
        store.fence(lease)
        SideEffect.objects.filter(operation_id=row.operation_id).update(duplicates_prevented=F("duplicates_prevented") + 1)
        # The visit that did it, by its checkpoint's seq (the timeline names it "pay #N" to a loop asking again).
        # Done by another run of a fork's family: that run is named ("done in run <origin>"), its visit is its own.
        done_in: dict[str, Any] = ({"done_in_visit": row.visit} if row.run_id == lease.run_id
                   else {"done_in_run": str(row.run_id), "done_in_its_visit": row.visit})
        store.journal(lease, JournalEntry.Kind.DUPLICATE_PREVENTED, row.step, name=row.action_name,
                      detail={"operation_id": row.operation_id, "external_ref": row.external_ref, **done_in})
