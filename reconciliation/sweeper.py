"""The reconciler's sweep: operations left STARTED too long while no worker holds their run."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from durable import logs, metrics
from durable.conf import durable_settings
from durable.downstream import Downstream, get_downstream, with_repair_noted
from durable.engine.ids import canonical_json, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.ledger import Reconciliation as Decision
from durable.engine.notifications import EventKind
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime import transitions
from durable.runtime.ledger import unknown_notice
from durable.runtime.reconciler import Finding, investigate, left_with, unreconcilable_started
from durable.scope import runs_in_scope
from durable.signals import operator_event
from durable.store.base import UNKNOWN_SIDE_EFFECT

log = logging.getLogger("durable.reconciliation")


def stale_operations(limit: int = 200) -> list[SideEffect]:
    now = timezone.now()
    cutoff = now - timedelta(seconds=durable_settings.DURABLE_RECONCILE_AFTER_SECONDS)
    live = Q(run__status=RunStatus.RUNNING, run__lease_expires_at__gte=now)
    return list(SideEffect.objects.filter(runs_in_scope("run__"), status=Op.STARTED, updated_at__lt=cutoff).exclude(live)
                .select_related("run").order_by("updated_at")[:limit])


def reconcile_stale(limit: int = 200) -> int:
    """Settle what can be settled without the run; returns how many operations moved."""
    moved = 0
    for row in stale_operations(limit):
        downstream = get_downstream(row.downstream)
        if downstream is None:
            log.warning("no adapter %r registered for operation %s", row.downstream, row.operation_id)
            continue
        with logs.bound(run_id=str(row.run_id), workflow=row.run.workflow_name, version=row.run.workflow_version,
                        step=row.step, operation_id=row.operation_id):
            moved += _reconcile(row, downstream)
    return moved


def _reconcile(row: SideEffect, downstream: Downstream) -> int:
    try:
        finding = investigate(row, downstream)
    except Exception:
        # One unreachable downstream must not stop the sweep, nor the re-enqueueing that follows it.
        log.warning("lookup of operation %s on %s failed; it stays STARTED until the next sweep",
                    row.operation_id, downstream.name, exc_info=True)
        return 0
    moved = _settle(row, finding)
    if moved:  # counted once, by whoever moved it (a worker or another sweep may have been first)
        metrics.reconciled(row.action_name, finding.decision)
        log.info("operation %s settled by the sweeper: %s (%s)", row.operation_id, finding.decision,
                 finding.evidence)
    return moved


def _settle(row: SideEffect, finding: Finding) -> int:
    if finding.decision is Decision.RETRY_SAME_KEY:
        return 0  # the run's own re-entry re-sends it with the same key
    if finding.found is not None:
        found = finding.found
        return _move(row, Op.SUCCEEDED, finding.decision, with_repair_noted(finding.evidence, found),
                     external_ref=found.external_ref,
                     result_json=found.result, response_hash=sha256_hex(canonical_json(found.result)))
    if finding.decision is Decision.NOT_FOUND:
        return _move(row, Op.FAILED_RETRYABLE, finding.decision, finding.evidence)
    evidence = f"{finding.evidence}; STARTED since {row.updated_at:%Y-%m-%d %H:%M:%S}"
    return _move(row, Op.UNKNOWN, finding.decision, evidence, last_error={"evidence": evidence})


def _move(row: SideEffect, target: Op, decision: str, evidence: str, **fields: object) -> int:
    """Settle the row; an UNKNOWN one holds its run for an operator with what the same interruption left in doubt.
    How many operations moved."""
    now = timezone.now()
    with transaction.atomic():
        in_doubt = _in_doubt_with(row, now) if target == Op.UNKNOWN else None
        # One notice for what one interruption left in doubt: the first operation's names the others.
        notice = unknown_notice(row, [other.operation_id for other, _ in in_doubt or ()], evidence=evidence)
        if not _moved(row, target, decision, evidence, now, notice=notice, **fields):
            return 0
        together = _hold_for_operator(row, in_doubt, evidence, now) if in_doubt is not None else []
    return 1 + len(together)


def _in_doubt_with(row: SideEffect, now: datetime) -> list[tuple[SideEffect, Downstream]] | None:
    """The run's other operations left STARTED that only an operator can settle; None while a worker holds the
    run (its own re-entry settles them)."""
    run = Run.objects.get(id=row.run_id)
    if run.status == RunStatus.RUNNING and run.lease_expires_at is not None and run.lease_expires_at >= now:
        return None
    return unreconcilable_started(run.id, besides=row.operation_id)


def _moved(row: SideEffect, target: Op, decision: str, evidence: str, now: datetime, *,
           notice: dict[str, object] | None = None, **fields: object) -> bool:
    if not SideEffect.objects.filter(operation_id=row.operation_id, status=Op.STARTED).update(
            status=target, updated_at=now, **fields):
        return False
    run = Run.objects.get(id=row.run_id)
    JournalEntry.objects.create(
        run=run, kind=JournalEntry.Kind.RECONCILIATION, step=row.step, name=row.action_name, created_at=now,
        fencing_token=run.fencing_token,
        detail={"operation_id": row.operation_id, "decision": decision, "evidence": evidence, "by": "sweeper"},
    )
    if target == Op.UNKNOWN:
        if notice is not None:
            operator_event.send(_move, kind=EventKind.OPERATION_UNKNOWN, run_id=run.id, subject=row.operation_id,
                                occurrence=row.attempts, detail=notice)
        metrics.operation_unknown(row.action_name)
    return True


def _hold_for_operator(row: SideEffect, in_doubt: list[tuple[SideEffect, Downstream]], evidence: str,
                      now: datetime) -> list[str]:
    """`row` is UNKNOWN and no worker holds its run: what the same interruption left in doubt (`in_doubt`) is
    marked UNKNOWN with it (told in `row`'s notice), and the run waits in NEEDS_ATTENTION with an error naming
    them all. The operations marked with it."""
    run = Run.objects.get(id=row.run_id)
    together = []
    for other, downstream in in_doubt:
        why = left_with(row, downstream)
        if _moved(other, Op.UNKNOWN, Decision.UNKNOWN, why, now, last_error={"evidence": why}):
            metrics.reconciled(other.action_name, Decision.UNKNOWN)
            together.append(other.operation_id)
    error = {"kind": UNKNOWN_SIDE_EFFECT, "operation_id": row.operation_id, "message": evidence}
    held = transitions.needs_attention(run.id, error, sources=_HELD_FROM, token=run.fencing_token,
                                       where=~Q(lease_expires_at__gte=now))
    if held is not None:
        operator_event.send(_move, kind=EventKind.RUN_NEEDS_ATTENTION, run_id=run.id, occurrence=run.fencing_token,
                            detail=held)
    return together


# A run no worker holds that the sweeper's reconciler holds for an operator (durable/engine/states.py).
_HELD_FROM = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING_RETRY})
