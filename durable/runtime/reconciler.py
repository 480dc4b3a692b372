"""Settling STARTED operations: retry with the same key, look it up, or say UNKNOWN (invariant 3).

`investigate` finds out what is true of an operation; the worker that re-enters it
(`reconcile_started`) and the sweeper (`reconciliation.sweeper`) each act on that finding.
Every decision goes to the run's journal with its evidence. UNKNOWN is never turned into a
failure or a retry here: only an operator resolves it. What one interruption left in doubt is
marked UNKNOWN together (`unreconcilable_started`): an operator sees it all at once and resolves
it in one round, not one round per operation found on the run's next re-execution.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import transaction

from durable import metrics
from durable.downstream import Downstream, DownstreamOutcome, get_downstream
from durable.engine.ledger import OperationStatus as Op
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


def unreconcilable_started(run_id: UUID | str, *, besides: str) -> list[tuple[SideEffect, Downstream]]:
    """The run's other operations left STARTED whose downstream neither honours idempotency keys nor can be
    looked up (an adapter registered here says so): nothing but an operator can settle them. Called when an
    operation of the run is found UNKNOWN while no call of it is in flight (a re-entry, the sweeper), so each
    was left by the same interruption; those a retry or a lookup can settle are left to them."""
    found = []
    for row in (SideEffect.objects.filter(run_id=run_id, status=Op.STARTED).exclude(operation_id=besides)
                .order_by("created_at", "operation_id")):
        downstream = get_downstream(row.downstream)
        if downstream is not None and reconciliation_for(downstream.capabilities) is Decision.UNKNOWN:
            found.append((row, downstream))
    return found


def left_with(row: SideEffect, downstream: Downstream) -> str:
    """The evidence an operation marked UNKNOWN together with `row` is marked with."""
    return (f"left STARTED with operation {row.operation_id} ({row.action_name}) by the same interruption; "
            f"{downstream.name} neither honours idempotency keys nor can be looked up")


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
    with lease_kept(store, lease) as kept:  # a slow lookup must not let a second worker look up and send meanwhile
        finding = kept.call(investigate, row, downstream)
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
    others = unreconcilable_started(row.run_id, besides=row.operation_id)
    with transaction.atomic():  # with what the same interruption left in doubt: one round of resolving, one notice
        ledger.mark_unknown(store, lease, row, evidence=evidence, together=[other.operation_id for other, _ in others])
        _journal(store, lease, row, finding.decision, evidence)
        for other, its_downstream in others:
            ledger.mark_unknown(store, lease, other, evidence=left_with(row, its_downstream), notify=False)
            _journal(store, lease, other, Decision.UNKNOWN, left_with(row, its_downstream))
    return Settled(outcome=None, unknown=True)
