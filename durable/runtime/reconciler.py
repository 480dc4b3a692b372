"""Settling STARTED operations: retry with the same key, look it up, or say UNKNOWN (invariant 3).

`investigate` finds out what is true of an operation; the worker that re-enters it
(`reconcile_started`) and the sweeper (`reconciliation.sweeper`) each act on that finding.
Every decision goes to the run's journal with its evidence. UNKNOWN is never turned into a
failure or a retry here: only an operator resolves it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable import metrics
from durable.downstream import Downstream, DownstreamOutcome
from durable.engine.ledger import Reconciliation as Decision
from durable.engine.ledger import reconciliation_for
from durable.models import JournalEntry, SideEffect
from durable.runtime import ledger
from durable.runtime.heartbeat import lease_kept
from durable.store import Lease, RunStore


@dataclass(frozen=True)
class Finding:
    """What is known of a STARTED operation, with the evidence for it."""

    decision: Decision  # RETRY_SAME_KEY, FOUND, NOT_FOUND or UNKNOWN
    evidence: str
    found: DownstreamOutcome | None = None


def investigate(row: SideEffect, downstream: Downstream) -> Finding:
    """Ask what the downstream's capabilities allow; may call its lookup (errors propagate)."""
    how = reconciliation_for(downstream.capabilities)
    if how is Decision.RETRY_SAME_KEY:
        return Finding(Decision.RETRY_SAME_KEY, f"{downstream.name} honours Idempotency-Key {row.operation_id}")
    if how is Decision.LOOK_UP:
        return look_up(row, downstream)
    return Finding(Decision.UNKNOWN, f"{downstream.name} neither honours idempotency keys nor can be looked up")


def look_up(row: SideEffect, downstream: Downstream) -> Finding:
    """The downstream's record of this operation, or its word that there is none (errors propagate)."""
    found = downstream.lookup(row.operation_id, row.business_key, row.payload or {})
    if found is not None:
        return Finding(Decision.FOUND, f"{downstream.name} has {found.external_ref}", found)
    return Finding(Decision.NOT_FOUND, f"{downstream.name} has no record: it never happened")


@dataclass(frozen=True)
class Settled:
    """The reconciler's verdict: the recorded outcome, or None to (re)send with the same key."""

    outcome: DownstreamOutcome | None
    unknown: bool = False
    may_have_happened: bool = False  # re-sent with the same key without knowing: a refusal settles nothing


def _journal(store: RunStore, lease: Lease, row: SideEffect, decision: Decision, evidence: str, **extra: Any) -> None:
    """Record a decision in the run's journal and count it: each decision is journaled exactly once."""
    store.journal(lease, JournalEntry.Kind.RECONCILIATION, row.step, name=row.action_name,
                  detail={"operation_id": row.operation_id, "decision": decision, "evidence": evidence, **extra})
    metrics.reconciled(row.action_name, decision)


def reconcile_started(store: RunStore, lease: Lease, row: SideEffect, downstream: Downstream) -> Settled:
    """A worker met a STARTED operation (or an ambiguous answer): decide what is true."""
    with lease_kept(store, lease):  # a slow lookup must not let a second worker look up and send meanwhile
        finding = investigate(row, downstream)
    if finding.decision is Decision.RETRY_SAME_KEY:
        _journal(store, lease, row, finding.decision, finding.evidence)
        return Settled(outcome=None, may_have_happened=True)
    if finding.found is not None:
        ledger.commit_success(store, lease, row, finding.found, evidence=f"found by lookup on {downstream.name}")
        _journal(store, lease, row, finding.decision, finding.evidence)
        return Settled(outcome=finding.found)
    if finding.decision is Decision.NOT_FOUND:
        _journal(store, lease, row, finding.decision, f"{finding.evidence}; sending")
        return Settled(outcome=None)
    evidence = f"{finding.evidence}; the request may have been applied (attempt {row.attempts})"
    ledger.mark_unknown(store, lease, row, evidence=evidence)
    _journal(store, lease, row, finding.decision, evidence)
    return Settled(outcome=None, unknown=True)
