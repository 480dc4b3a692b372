"""The one door for a run's state outside the worker's lease (invariant 20, docs/invariants.md; the moves:
docs/operations.md, "The state table and its one door").

The worker's own moves, out of RUNNING under its lease, are the run store's (durable/store/). Every other move of
a run's status is made here: a run started with its first checkpoint, woken (a timer, an event, a child's end, a
decision), resumed, retried, cancelled, migrated onto a newer version with the migration's checkpoint, held for an
operator, or going on once an operator resolved what held it. Each move:

- is checked against the state table (durable/engine/states.py): one the table forbids raises IllegalTransition,
  never a silent no-op;
- is one conditional UPDATE, on the run's status (and on the fencing token the caller read, where it has one),
  so a run that changed meanwhile is not moved: `move` answers False and its caller says what that means (the
  API's 409);
- sends the run to a worker once it is committed, when it made the run PENDING.

A new kind of move (paused, waiting on a limit, forked) is a row of the table and a call of `move`.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Q
from django.utils import timezone

from durable.engine.states import RunStatus, checked_sources
from durable.models import Checkpoint, Run
from durable.runtime import dispatch
from durable.store.base import naming_every_unknown

# The `step` of the checkpoint a migration writes: "migration v1->v2". What approvals asks of it is answered by
# `taken_over_by_migration`.
MIGRATION_CHECKPOINT_PREFIX = "migration v"


def move(run_id: UUID | str, target: RunStatus, *, sources: Iterable[RunStatus | str] | None = None,
         where: Q | None = None, token: int | None = None, **fields: Any) -> bool:
    """Move the run from one of `sources` (by default, every status the table allows to reach `target`) to
    `target`, with `fields`, in one conditional UPDATE: `where` is more of its condition, `token` the fencing
    token the caller read. False when the run met none of it (it changed meanwhile). A run made PENDING is sent
    to a worker once the caller's transaction commits."""
    return move_all([run_id], target, sources=sources, where=where, token=token, **fields) == 1


def move_all(run_ids: Collection[UUID | str], target: RunStatus, *, sources: Iterable[RunStatus | str] | None = None,
             where: Q | None = None, token: int | None = None, **fields: Any) -> int:
    """`move` for many runs in one statement (the sweeper's wakes); how many moved. Each run made PENDING is sent:
    a run that moved meanwhile and is sent as well costs one harmless message (the lease decides)."""
    if not run_ids:
        return 0
    condition = Q(id__in=list(run_ids), status__in=sorted(checked_sources(target, sources))) & (where or Q())
    if token is not None:
        condition &= Q(fencing_token=token)
    moved = Run.objects.filter(condition).update(status=target, **{"updated_at": timezone.now(), **fields})
    if moved and target == RunStatus.PENDING:
        for run_id in run_ids:
            dispatch.enqueue_on_commit(run_id)
    return moved


def start(*, next_step: str, state: dict[str, Any], schema_version: int, enqueue: bool = True, **fields: Any) -> Run:
    """Inside the caller's transaction: a new run, PENDING, with its first checkpoint (seq 0, before any step);
    sent to a worker once that commits unless `enqueue` is False (the sweeper, or the caller, sends it later)."""
    run = Run.objects.create(status=RunStatus.PENDING, current_step=next_step, **fields)
    Checkpoint.objects.create(run=run, seq=0, step="", next_step=next_step, state=state,
                              state_schema_version=schema_version, created_at=run.created_at)
    if enqueue:
        dispatch.enqueue_on_commit(run.id)
    return run


def migrate(run_id: UUID | str, *, seq: int, from_version: int, to_version: int, next_step: str,
            state: dict[str, Any], schema_version: int, now: datetime, **fields: Any) -> bool:
    """Inside the caller's transaction: a BLOCKED_VERSION run whose newest checkpoint is still `seq` moves to
    PENDING on `to_version`, with the migration's checkpoint (seq + 1) that carries its state over. False when
    the run changed meanwhile (nothing is written)."""
    if not move(run_id, RunStatus.PENDING, sources={RunStatus.BLOCKED_VERSION}, where=Q(checkpoint_seq=seq),
                current_step=next_step, checkpoint_seq=seq + 1, updated_at=now, enqueued_at=now, **fields):
        return False
    step = f"{MIGRATION_CHECKPOINT_PREFIX}{from_version}->v{to_version}"
    Checkpoint.objects.create(run_id=run_id, seq=seq + 1, step=step, next_step=next_step, state=state,
                              state_schema_version=schema_version, created_at=now)
    return True


def needs_attention(run_id: UUID | str, error: dict[str, Any], *, sources: Iterable[RunStatus], token: int,
                    where: Q | None = None) -> dict[str, Any] | None:
    """Hold a run no worker holds for an operator (the sweeper's reconciler found an operation UNKNOWN), fenced on
    the token read with it: the error it is held with (naming every UNKNOWN operation of the run), or None when
    the run changed meanwhile."""
    error = naming_every_unknown(run_id, error)
    moved = move(run_id, RunStatus.NEEDS_ATTENTION, sources=sources, where=where, token=token, error=error,
                 lease_owner=None, lease_expires_at=None)
    return error if moved else None


def taken_over_by_migration(run_id: UUID | str, after_visit: int, up_to_visit: int, step: str) -> bool:
    """Whether an operator's migration took the run over between two visits (checkpoint seqs `after_visit`,
    excluded, and `up_to_visit`) with no visit of `step` between them: what approvals asks to carry a request
    across a migration."""
    between = Checkpoint.objects.filter(run_id=run_id, seq__gt=after_visit, seq__lte=up_to_visit)
    return (between.filter(step__startswith=MIGRATION_CHECKPOINT_PREFIX).exists()
            and not between.filter(step=step).exists())
