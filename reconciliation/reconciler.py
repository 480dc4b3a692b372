"""Settling STARTED operations: retry with the same key, look it up, or say UNKNOWN (invariant 3).

Used by a worker that re-enters a STARTED operation, and by the sweeper for operations left
STARTED too long. Every decision goes to the run's journal with its evidence. UNKNOWN is never
turned into a failure or a retry here: only an operator resolves it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable import ledger
from durable.downstream import Downstream, Outcome
from durable.engine.ledger import Reconciliation, reconciliation_for
from durable.models import JournalEntry, SideEffect
from durable.store import Lease, RunStore


@dataclass(frozen=True)
class Settled:
    """The reconciler's verdict: the recorded outcome, or None to (re)send with the same key."""

    outcome: Outcome | None
    unknown: bool = False


def _journal(db: RunStore, lease: Lease, row: SideEffect, decision: str, evidence: str, **extra: Any) -> None:
    db.journal(lease, JournalEntry.Kind.RECONCILIATION, row.step, name=row.action_name,
               detail={"operation_id": row.operation_id, "decision": decision, "evidence": evidence, **extra})


def reconcile_started(db: RunStore, lease: Lease, row: SideEffect, downstream: Downstream) -> Settled:
    """A worker met a STARTED operation (or an ambiguous answer): decide what is true."""
    how = reconciliation_for(downstream.capabilities)
    if how is Reconciliation.RETRY_SAME_KEY:
        _journal(db, lease, row, how.value, f"{downstream.name} honours Idempotency-Key {row.operation_id}")
        return Settled(outcome=None)
    if how is Reconciliation.LOOK_UP:
        found = downstream.lookup(row.operation_id, row.business_key, row.payload or {})
        if found is not None:
            ledger.commit_success(db, lease, row, found, evidence=f"found by lookup on {downstream.name}")
            _journal(db, lease, row, "found", f"{downstream.name} has {found.external_ref}")
            return Settled(outcome=found)
        _journal(db, lease, row, "not_found", f"{downstream.name} has no record: it never happened; sending")
        return Settled(outcome=None)
    evidence = (f"{downstream.name} neither honours idempotency keys nor can be looked up; "
                f"the request may have been applied (attempt {row.attempts})")
    ledger.mark_unknown(db, lease, row, evidence=evidence)
    _journal(db, lease, row, "unknown", evidence)
    return Settled(outcome=None, unknown=True)
