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

A fork is started by `fork`, a start with its origin named. A new kind of move (paused, waiting on a limit) is a row of the table and a call of `move`: a pause is
`pause` (at once, or by the worker holding the run at its step boundary) after `ask_to_pause`, and `unpause`.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db.models import Q
from django.utils import timezone

import durable.store.values as values
from durable.engine.states import RunStatus, checked_sources, sources_of
from durable.models import Checkpoint, PauseSwitch, Run
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
    sent to a worker once that commits unless `enqueue` is False (the sweeper, or the caller, sends it later).
    A run of a workflow whose kill switch is off is held PAUSED at once (durable/pauses.py)."""
    run = Run.objects.create(status=RunStatus.PENDING, current_step=next_step, **fields)
    Checkpoint.objects.create(run=run, seq=0, step="", next_step=next_step, state=values.stored(state),
                              state_schema_version=schema_version, created_at=run.created_at)
    if _hold_if_switched_off(run):
        run.refresh_from_db()
        return run
    if enqueue:
        dispatch.enqueue_on_commit(run.id)
    return run


def fork(*, next_step: str, state: dict[str, Any], schema_version: int, **fields: Any) -> Run:
    """Inside the caller's transaction: a fork (durable/forks.py), a new run started as `start` starts one, its first
    checkpoint (seq 0) the origin's checkpoint carried over (`fields` name the origin, its seq and the family's
    root). Held PAUSED at once when its workflow's kill switch is off, like any start."""
    return start(next_step=next_step, state=state, schema_version=schema_version, **fields)


def _hold_if_switched_off(run: Run) -> bool:
    """Accepted and held: PAUSED with its switch's reason, when a kill switch of its workflow (version) is off."""
    switch = (PauseSwitch.objects.filter(workflow_name=run.workflow_name,
                                         workflow_version__in=[PauseSwitch.EVERY_VERSION, run.workflow_version])
              .order_by("workflow_version").first())
    if switch is None:
        return False
    return pause([run.id], sources={RunStatus.PENDING}, reason=switch.reason, now=timezone.now(), by_switch=True) == 1


def migrate(run_id: UUID | str, *, seq: int, from_version: int, to_version: int, next_step: str,
            state: dict[str, Any], schema_version: int, now: datetime, **fields: Any) -> bool:
    """Inside the caller's transaction: a BLOCKED_VERSION run whose newest checkpoint is still `seq` moves to
    PENDING on `to_version`, with the migration's checkpoint (seq + 1) that carries its state over. False when
    the run changed meanwhile (nothing is written)."""
    if not move(run_id, RunStatus.PENDING, sources={RunStatus.BLOCKED_VERSION}, where=Q(checkpoint_seq=seq),
                current_step=next_step, checkpoint_seq=seq + 1, updated_at=now, enqueued_at=now, **fields):
        return False
    step = f"{MIGRATION_CHECKPOINT_PREFIX}{from_version}->v{to_version}"
    Checkpoint.objects.create(run_id=run_id, seq=seq + 1, step=step, next_step=next_step, state=values.stored(state),
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


# What a pause leaves on the run while it is PAUSED: its request and reason (Run.pause_requested_at, pause_reason);
# what it waited on (`waiting_for`) stays for the visit that resumes it. Its lease is let go.
_LET_GO = {"lease_owner": None, "lease_expires_at": None}


def ask_to_pause(run_ids: Collection[UUID | str], *, sources: Iterable[RunStatus | str], reason: str, now: datetime,
                 by_switch: bool = False) -> int:
    """Ask runs in `sources` that were not asked yet to pause, without moving them: the worker holding one pauses
    it at its next step boundary, and one held for an operator pauses when it is released (it is claimed, and its
    worker sees the request first). How many were asked."""
    if not run_ids:
        return 0
    return Run.objects.filter(id__in=list(run_ids), status__in=sorted(sources), pause_requested_at__isnull=True
                              ).update(pause_requested_at=now, pause_reason=reason, paused_by_switch=by_switch,
                                       updated_at=now)


def pause(run_ids: Collection[UUID | str], *, sources: Iterable[RunStatus | str], reason: str, now: datetime,
          by_switch: bool = False) -> int:
    """PAUSED at once, from `sources` (runs no worker holds), with the pause's reason: how many moved. A parked
    run stays parked: no timer, event or decision wakes a PAUSED run."""
    return move_all(run_ids, RunStatus.PAUSED, sources=sources, pause_requested_at=now, pause_reason=reason,
                    paused_by_switch=by_switch, **_LET_GO)


def paused_by_worker(run_id: UUID | str, *, token: int) -> bool:
    """The worker holding the run (fenced on its token) saw the pause asked for, at a step boundary or when it
    claimed the run: PAUSED, its lease let go. False when the lease was lost meanwhile."""
    return move(run_id, RunStatus.PAUSED, sources={RunStatus.RUNNING}, token=token,
                where=Q(pause_requested_at__isnull=False), **_LET_GO)


def unpause(run_ids: Collection[UUID | str], *, now: datetime, where: Q | None = None) -> int:
    """PAUSED -> PENDING, sent to a worker: the visit it stopped in runs again from its checkpoint, taking up what it
    waited on and reusing what it recorded. Also forgets a pause still only asked for (of a run that was RUNNING or
    held for an operator). How many moved."""
    condition = Q(id__in=list(run_ids)) & (where or Q())
    Run.objects.filter(condition, pause_requested_at__isnull=False).exclude(status=RunStatus.PAUSED).update(
        pause_requested_at=None, pause_reason="", paused_by_switch=False, updated_at=now)
    return move_all(run_ids, RunStatus.PENDING, sources=sources_of(RunStatus.PENDING) & {RunStatus.PAUSED},
                    where=where, pause_requested_at=None, pause_reason="", paused_by_switch=False,
                    next_attempt_at=None, enqueued_at=now)
