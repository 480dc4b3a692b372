"""Postgres run store: the claim, each step write and each ledger write are one statement in autocommit.

A data-modifying CTE updates the run only if this worker's fencing token still holds and
feeds the checkpoint INSERT from the updated row: no row, no checkpoint, nothing written.
The claim locks the row, reads what the metrics need from before, takes the lease and returns
the newest checkpoint and the recorded activity results in one statement (one round trip where
there were three); the reads it cannot vouch for are made again in plain SQL, skipping the ORM's
query building (about 0.5 ms a query here). A step's write may be left in flight while the next
step runs (durable/store/in_flight.py).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field
from django.utils import timezone

import durable.store.batched as batched
import durable.store.in_flight as in_flight
import durable.store.values as values
from durable.conf import durable_settings
from durable.engine.costs import Spending
from durable.engine.errors import LeaseLost
from durable.engine.replay import RecordedCall
from durable.engine.states import CLAIMABLE, RunStatus, checked_sources
from durable.models import JournalEntry, Run, SideEffect
from durable.store.base import (
    BEFORE_CLAIM,
    Lease,
    ModelCall,
    Prefetched,
    ResumePoint,
    RunStore,
    claim_fields,
    claimed_lease,
)
from durable.store.checkpoints import resumed, to_store
from durable.store.rows import RowReader
from durable.store.statements import run_statement

# The portable claim's rule in one statement (free: no owner, or expired; due; claimable), which
# also returns what the executor reads next: the newest checkpoint and the recorded activity
# results of the visit it starts (its state: its full checkpoint and the differences after it, in seq order,
# durable.store.checkpoints; its step from that checkpoint; NULL: recorded before visits
# existed, RunStore.recorded_calls). Those two reads see the statement's snapshot, taken before the row lock was granted:
# if another transaction wrote the run meanwhile (its fenced writes always update the run row
# with the checkpoint or journal entry they add), `resume_fresh` is false and the store reads
# them again after the claim has committed.
_CLAIM_SQL = """
WITH seen AS (
    SELECT xmin AS version FROM durable_run WHERE id = %(run_id)s
), before AS (
    SELECT id, xmin AS version, status, next_attempt_at, lease_expires_at, updated_at
      FROM durable_run WHERE id = %(run_id)s FOR UPDATE
), claimed AS (
    UPDATE durable_run AS run
       SET fencing_token = run.fencing_token + 1, status = %(status)s, lease_owner = %(lease_owner)s,
           next_attempt_at = NULL, updated_at = %(updated_at)s, lease_expires_at = %(lease_expires_at)s
      FROM before
     WHERE run.id = before.id
       AND (run.lease_owner IS NULL OR run.lease_expires_at < %(now)s)
       AND (run.next_attempt_at IS NULL OR run.next_attempt_at <= %(now)s)
       AND run.status = ANY(%(claimable)s)
    RETURNING {run_columns}, before.status AS before_status, before.next_attempt_at AS before_next_attempt_at,
              before.lease_expires_at AS before_lease_expires_at, before.updated_at AS before_updated_at,
              before.version = (SELECT version FROM seen) AS resume_fresh
)
SELECT claimed.*, cp.next_step AS resume_next_step,
       (SELECT json_agg(json_build_array(c.seq, c.state, c.delta) ORDER BY c.seq)::text
          FROM durable_checkpoint AS c
         WHERE c.run_id = claimed.id AND c.seq BETWEEN COALESCE(cp.base, cp.seq) AND cp.seq) AS resume_chain,
       cp.state_schema_version AS resume_schema_version,
       (SELECT json_agg(json_build_array(j.call_index, j.name, j.result) ORDER BY j.call_index)::text
          FROM durable_journalentry AS j
         WHERE j.run_id = claimed.id AND j.kind = 'activity' AND j.step = cp.next_step
           AND (j.visit = claimed.checkpoint_seq OR j.visit IS NULL)) AS resume_calls
  FROM claimed LEFT JOIN durable_checkpoint AS cp ON cp.run_id = claimed.id AND cp.seq = claimed.checkpoint_seq
"""

# The run's columns in the model's field order, so the row becomes a Run by position.
_RUNS = RowReader(Run)
_CLAIM_EXTRAS = ("before_status", "before_next_attempt_at", "before_lease_expires_at", "before_updated_at",
                 "resume_fresh", "resume_next_step", "resume_chain", "resume_schema_version", "resume_calls")
_CLAIM_SQL = _CLAIM_SQL.format(run_columns=_RUNS.columns("run"))

_CLAIMABLE = sorted(status.value for status in checked_sources(RunStatus.RUNNING, CLAIMABLE))

_RESUME_POINT_SQL = """
SELECT cp.next_step, cp.state_schema_version,
       (SELECT json_agg(json_build_array(c.seq, c.state, c.delta) ORDER BY c.seq)::text
          FROM durable_checkpoint AS c
         WHERE c.run_id = cp.run_id AND c.seq BETWEEN COALESCE(cp.base, cp.seq) AND cp.seq)
  FROM durable_checkpoint AS cp WHERE cp.run_id = %s AND cp.seq = %s
"""

_RECORDED_CALLS_SQL = """
SELECT call_index, name, result FROM durable_journalentry
 WHERE run_id = %(run_id)s AND kind = 'activity' AND step = %(step)s AND (visit = %(visit)s OR visit IS NULL)
 ORDER BY call_index
"""

# A step's progress: no indexed column changes (updated_at stays; the expiry only when the lease is
# renewed, Lease.renewal), so on a table with room on its pages the UPDATE is heap-only (HOT).
_STEP_SQL = """
WITH fenced AS (
    UPDATE durable_run
       SET checkpoint_seq = %(seq)s, current_step = %(next_step)s, attempt = 0,
           lease_expires_at = COALESCE(%(lease_expires_at)s, lease_expires_at)
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s - 1
 RETURNING id, pause_requested_at
)
INSERT INTO durable_checkpoint (run_id, seq, step, next_step, state, delta, base, state_schema_version, created_at)
SELECT id, %(seq)s, %(step)s, %(next_step)s, %(state)s::jsonb, %(delta)s::jsonb, %(base)s, %(schema_version)s,
       %(now)s FROM fenced
RETURNING (SELECT pause_requested_at IS NOT NULL FROM fenced)
"""

# The same, sent while the next step runs (durable/store/in_flight.py): its parameters' types by OID.
_STEP_WRITE = in_flight.PreparedWrite.of("durable_step_write", _STEP_SQL, {
    "run_id": 2950, "token": 20, "seq": 23, "step": 25, "next_step": 25, "state": 25, "delta": 25, "base": 23,
    "schema_version": 23, "now": 1184, "lease_expires_at": 1184})  # uuid, int8, int4, text, timestamptz

# The last step: the run's status changes, the lease is released. A retry's error is cleared: it belongs
# to the timeline (the journal's RETRY_SCHEDULED entries), and a run that succeeded has none.
_FINISH_SQL = """
WITH fenced AS (
    UPDATE durable_run
       SET checkpoint_seq = %(seq)s, current_step = '', attempt = 0, status = 'SUCCEEDED', output = %(output)s::jsonb,
           error = NULL, finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s - 1
 RETURNING id
)
INSERT INTO durable_checkpoint (run_id, seq, step, next_step, state, delta, base, state_schema_version, created_at)
SELECT id, %(seq)s, %(step)s, '', %(state)s::jsonb, %(delta)s::jsonb, %(base)s, %(schema_version)s, %(now)s
  FROM fenced
"""

# The same, sent behind the previous step's write while that one is still in flight: one wait for both.
_FINISH_WRITE = in_flight.PreparedWrite.of("durable_finish_write", _FINISH_SQL, {
    "run_id": 2950, "token": 20, "seq": 23, "step": 25, "state": 25, "delta": 25, "base": 23, "schema_version": 23,
    "now": 1184, "output": 25})

# A write within a step (an activity's result, a ledger move) writes nothing if the token no longer
# holds, and, like a step's write, changes no indexed column unless the lease is due for renewal
# (Lease.renewal): heap-only. The heartbeat's renewal always sets the expiry.
_FENCE = """
    UPDATE durable_run SET lease_expires_at = COALESCE(%(lease_expires_at)s, lease_expires_at)
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s
 RETURNING id
"""

# The heartbeat's renewal (RunStore.renew): fenced on the token alone, since this worker's steps
# move the checkpoint on meanwhile; the expiry is its only write.
_RENEW = """
    UPDATE durable_run SET lease_expires_at = %(lease_expires_at)s
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING'
 RETURNING id
"""

# The heartbeat's round (RunStore.renew_many): every lease of the process's calls in flight in one statement, those
# due renewed, the rest only read; a lease not returned is lost (another worker took the run, or it was cancelled).
_RENEW_MANY = """
WITH leases AS (
    SELECT * FROM unnest(%(run_ids)s::uuid[], %(tokens)s::bigint[], %(expiries)s::timestamptz[])
        AS lease(run_id, token, expires_at)
), renewed AS (
    UPDATE durable_run AS run SET lease_expires_at = leases.expires_at
      FROM leases
     WHERE leases.expires_at IS NOT NULL AND run.id = leases.run_id AND run.fencing_token = leases.token
       AND run.status = 'RUNNING'
 RETURNING run.id
)
SELECT id FROM renewed
 UNION ALL
SELECT run.id FROM durable_run AS run JOIN leases ON run.id = leases.run_id
 WHERE leases.expires_at IS NULL AND run.fencing_token = leases.token AND run.status = 'RUNNING'
"""

_ACTIVITY_SQL = f"""
WITH fenced AS ({_FENCE})
INSERT INTO durable_journalentry (run_id, kind, step, visit, call_index, name, result, fencing_token, created_at)
SELECT id, 'activity', %(step)s, %(seq)s, %(call_index)s, %(name)s, %(result)s::jsonb, %(token)s, %(now)s FROM fenced
"""

# Several results that came back together (ctx.parallel): one fenced statement, one row each, or none.
_ACTIVITIES_SQL = f"""
WITH fenced AS ({_FENCE})
INSERT INTO durable_journalentry (run_id, kind, step, visit, call_index, name, result, fencing_token, created_at)
SELECT fenced.id, 'activity', %(step)s, %(seq)s, call.call_index, call.name, call.result, %(token)s, %(now)s
  FROM fenced CROSS JOIN jsonb_to_recordset(%(calls)s::jsonb) AS call(call_index int, name text, result jsonb)
"""

# Model calls' results with their usage (durable.engine.costs), and what they used added to the run's totals, in
# one fenced statement: no indexed column changes, so the UPDATE stays heap-only.
_MODEL_CALLS_SQL = """
WITH fenced AS (
    UPDATE durable_run SET lease_expires_at = COALESCE(%(lease_expires_at)s, lease_expires_at),
           input_tokens = input_tokens + %(input_tokens)s, output_tokens = output_tokens + %(output_tokens)s,
           cost = cost + %(cost)s, unpriced_tokens = unpriced_tokens + %(unpriced_tokens)s
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s
 RETURNING id
)
INSERT INTO durable_journalentry (run_id, kind, step, visit, call_index, name, result, detail, fencing_token, created_at)
SELECT fenced.id, 'activity', %(step)s, %(seq)s, call.call_index, call.name, call.result, call.detail, %(token)s, %(now)s
  FROM fenced CROSS JOIN jsonb_to_recordset(%(calls)s::jsonb)
       AS call(call_index int, name text, result jsonb, detail jsonb)
"""

# The row as inserted, or as it was; no row at all when the lease is lost (or in a race the
# portable path settles).
_PREPARE_OPERATION_SQL = f"""
WITH fenced AS ({_FENCE}), inserted AS (
    INSERT INTO durable_sideeffect (operation_id, run_id, step, visit, action_name, downstream, business_key,
                                    request_hash, payload, status, external_ref, response_hash, attempts,
                                    duplicates_prevented, resolution_evidence, created_at, updated_at)
    SELECT %(operation_id)s, id, %(step)s, %(seq)s, %(action_name)s, %(downstream)s, %(business_key)s, %(request_hash)s,
           %(payload)s::jsonb, 'PENDING', '', '', 0, 0, '', %(now)s, %(now)s FROM fenced
    ON CONFLICT (operation_id) DO NOTHING
    RETURNING {{columns}}
)
SELECT inserted.*, true AS created FROM inserted
 UNION ALL
SELECT {{existing}}, false FROM durable_sideeffect AS existing
 WHERE existing.operation_id = %(operation_id)s AND EXISTS (SELECT FROM fenced)
"""
_OPERATIONS = RowReader(SideEffect)
_PREPARE_OPERATION_SQL = _PREPARE_OPERATION_SQL.format(columns=_OPERATIONS.columns("durable_sideeffect"),
                                                       existing=_OPERATIONS.columns("existing"))

# The same, queued behind the step write in flight (a side effect's step comes after another step).
_PREPARE_OPERATION = in_flight.PreparedWrite.of("durable_prepare_operation", _PREPARE_OPERATION_SQL, {
    "run_id": 2950, "token": 20, "seq": 23, "now": 1184, "lease_expires_at": 1184, "operation_id": 25, "step": 25,
    "action_name": 25, "downstream": 25, "business_key": 25, "request_hash": 25, "payload": 25})

_MOVE_OPERATION_SQL = f"""
WITH fenced AS ({_FENCE}), moved AS (
    UPDATE durable_sideeffect SET status = %(target)s, updated_at = %(now)s, attempts = attempts + %(attempt)s{{sets}}
     WHERE operation_id = %(operation_id)s AND status = ANY(%(sources)s) AND EXISTS (SELECT FROM fenced)
 RETURNING operation_id
), journaled AS (
    INSERT INTO durable_journalentry (run_id, kind, step, visit, name, detail, fencing_token, created_at)
    SELECT %(run_id)s, %(kind)s, %(step)s, %(seq)s, %(name)s, %(detail)s::jsonb, %(token)s, %(now)s FROM moved
     WHERE %(journaled)s
)
SELECT (SELECT count(*) FROM fenced), (SELECT count(*) FROM moved)
"""

_JSON_COLUMNS = frozenset({"payload", "result_json", "last_error"})


class PostgresRunStore(RunStore):
    def claim(self, run_id: UUID | str, owner: str, lease_seconds: float) -> tuple[Lease, Run] | None:
        now = timezone.now()
        params = {**claim_fields(owner, now, lease_seconds), "run_id": run_id, "now": now, "claimable": _CLAIMABLE}
        _, row = run_statement(_CLAIM_SQL, params, "one")
        if row is None:  # no such run, or not free, not due or not claimable
            return None
        run = _RUNS.instance(row, _CLAIM_EXTRAS)
        before = {name: getattr(run, f"before_{name}") for name in BEFORE_CLAIM}
        lease = claimed_lease(run, owner, lease_seconds, now, before)
        if getattr(run, "resume_fresh"):  # the claim's extras are attributes RowReader set by name
            lease.prefetched = _prefetched(run, lease)
        return lease, run

    def resume_point(self, lease: Lease) -> ResumePoint:
        prefetched = lease.prefetched
        if prefetched is not None and prefetched.point is not None and prefetched.point.seq == lease.seq:
            point, prefetched.point = prefetched.point, None  # handed out once: later calls read afresh
            return point
        _, (next_step, schema_version, rows) = run_statement(_RESUME_POINT_SQL, [lease.run_id, lease.seq], "one")
        state, lease.chain = resumed(_json(rows))
        return ResumePoint(lease.seq, next_step, state, schema_version)

    def recorded_calls(self, lease: Lease, step: str) -> list[RecordedCall]:
        prefetched = lease.prefetched
        if prefetched is not None and prefetched.calls is not None and prefetched.step == step:
            calls, prefetched.calls = prefetched.calls, None  # as of the claim: later calls read afresh
            return calls
        _, rows = run_statement(_RECORDED_CALLS_SQL, {"run_id": lease.run_id, "step": step, "visit": lease.seq}, "all")
        return _recorded(rows)

    def _execute_fenced(self, sql: str, params: dict[str, Any], lease: Lease) -> None:
        rowcount, _ = run_statement(sql, params)
        _check_fence(lease, rowcount)

    def commit_step(self, lease: Lease, step: str, next_step: str, state: dict[str, Any], schema_version: int) -> None:
        now = timezone.now()
        db = connections[DEFAULT_DB_ALIAS]
        if _batching(db):  # to the process's writer; its outcome is read before the next write, call or query
            params = _step_params(lease, now, step, state, schema_version)
            checkpoint = batched.Checkpoint(next_step, params["state"], params["delta"], params["base"], schema_version)
            expires = lease.renewal(now)  # once: it notes the renewal as made
            if not _joined(lease, step, checkpoint, expires):
                _hand(db, lease, step, now, expires, checkpoint=checkpoint)
            lease.seq += 1
            return
        params = {**_step_params(lease, now, step, state, schema_version), "next_step": next_step,
                  "lease_expires_at": lease.renewal(now)}
        if in_flight.overlapping_allowed(db):  # its result is read before the next write or call
            in_flight.send(db, _STEP_WRITE, params, _step_checked(db, lease),
                           prepare=durable_settings.DURABLE_PREPARE_STATEMENTS)
        else:
            rowcount, row = run_statement(_STEP_SQL, params, "one")
            _check_fence(lease, rowcount)
            _note_pause(lease, row)
        lease.seq += 1  # what the next write is fenced on; if one in flight was refused, that one raises first

    def pause_asked(self, lease: Lease) -> bool:
        """Free here: each step's write returns whether a pause was asked; settling the one in flight reads it."""
        self.confirm_writes()
        return lease.pause_asked

    def overlapping(self) -> AbstractContextManager[None]:
        if not durable_settings.DURABLE_PIPELINE_STEP_WRITES:
            return nullcontext()
        return in_flight.overlapping(connections[DEFAULT_DB_ALIAS])

    def confirm_writes(self) -> None:
        in_flight.settle(connections[DEFAULT_DB_ALIAS])

    def finish(self, lease: Lease, step: str, state: dict[str, Any], schema_version: int, output: Any) -> None:
        params = {**_step_params(lease, timezone.now(), step, state, schema_version), "output": json.dumps(output)}
        db = connections[DEFAULT_DB_ALIAS]
        if in_flight.overlapping_allowed(db):  # queued behind the last step's write, then both are read
            _check_fence(lease, in_flight.rowcount(_send_behind(db, _FINISH_WRITE, params)))
        else:
            self._execute_fenced(_FINISH_SQL, params, lease)
        lease.seq += 1

    def renew(self, lease: Lease) -> None:
        now = timezone.now()
        self._execute_fenced(_RENEW, {"run_id": lease.run_id, "token": lease.token,
                                      "lease_expires_at": lease.extended(now)}, lease)

    def renew_many(self, leases: Sequence[tuple[Lease, bool]]) -> list[bool]:
        now = timezone.now()
        expiries = [lease.extended(now) if renew else None for lease, renew in leases]
        _, rows = run_statement(_RENEW_MANY, {"run_ids": _array_text(lease.run_id for lease, _ in leases),
                                              "tokens": _array_text(lease.token for lease, _ in leases),
                                              "expiries": _array_text(expiries)}, "all")
        held = {str(run_id) for (run_id,) in rows}
        return [str(lease.run_id) in held for lease, _ in leases]

    def record_activity(self, lease: Lease, step: str, call_index: int, name: str, result: Any) -> None:
        text = values.stored_text(result, json.dumps(result))
        db = connections[DEFAULT_DB_ALIAS]
        if _batching(db):  # to the process's writer; its outcome is read before the next write, call or query
            now = timezone.now()
            _hand(db, lease, step, now, lease.renewal(now), calls=[batched.RecordedCall(call_index, name, text)])
            return
        params = {**_fence_params(lease, timezone.now()), "step": step, "call_index": call_index, "name": name,
                  "result": text}
        self._execute_fenced(_ACTIVITY_SQL, params, lease)

    def record_activities(self, lease: Lease, step: str, calls: list[tuple[int, str, Any]]) -> None:
        rows = [{"call_index": index, "name": name, "result": values.stored(result)} for index, name, result in calls]
        params = {**_fence_params(lease, timezone.now()), "step": step, "calls": json.dumps(rows)}
        rowcount, _ = run_statement(_ACTIVITIES_SQL, params)
        if rowcount != len(rows):  # nothing was written: the fence found the lease gone
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")

    def record_model_calls(self, lease: Lease, step: str, calls: list[ModelCall]) -> None:
        spent = Spending.of(priced for *_, priced in calls)
        rows = [{"call_index": index, "name": name, "result": values.stored(result), "detail": {"usage": priced.as_json()}}
                for index, name, result, priced in calls]
        params = {**_fence_params(lease, timezone.now()), "step": step, "calls": json.dumps(rows),
                  "input_tokens": spent.input_tokens, "output_tokens": spent.output_tokens, "cost": spent.cost,
                  "unpriced_tokens": spent.unpriced_tokens}
        rowcount, _ = run_statement(_MODEL_CALLS_SQL, params)
        if rowcount != len(rows):  # nothing was written: the fence found the lease gone
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")

    def prepare_operation(self, lease: Lease, fields: dict[str, Any]) -> tuple[SideEffect, bool]:
        params = {**_fence_params(lease, timezone.now()), **fields, "payload": _jsonb(fields.get("payload"))}
        db = connections[DEFAULT_DB_ALIAS]
        if in_flight.overlapping_allowed(db):  # queued behind the previous step's write: one wait for both
            row = in_flight.first_row(db, _send_behind(db, _PREPARE_OPERATION, params))
        else:
            _, row = run_statement(_PREPARE_OPERATION_SQL, params, "one")
        if row is None:  # the lease is lost, or another transaction inserted the row meanwhile
            return super().prepare_operation(lease, fields)
        operation = _OPERATIONS.instance(row, ("created",))
        return operation, getattr(operation, "created")  # an extra the statement selected

    def move_operation(self, lease: Lease, row: SideEffect, sources: frozenset[str], target: str, *,
                       journal: dict[str, Any] | None, count_attempt: bool = False,
                       **fields: Any) -> datetime | None:
        now = timezone.now()
        sets, set_params = _set_fields(fields)
        params = {
            **_fence_params(lease, now), **set_params, "operation_id": row.operation_id, "target": target,
            "sources": sorted(sources), "attempt": int(count_attempt), "kind": JournalEntry.Kind.SIDE_EFFECT.value,
            "step": row.step, "name": row.action_name, "detail": _jsonb(journal), "journaled": journal is not None,
        }
        _, (fenced, moved) = run_statement(_MOVE_OPERATION_SQL.format(sets=sets), params, "one")
        if not fenced:
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")
        return now if moved else None


def _batching(db: Any) -> bool:
    """A step write or an activity's result goes to the process's writer (durable/store/batched.py) when the run's
    thread holds no connection of the pool: it gave it back before a call, and taking one again would wait for the
    pool and cost more than the writer. A thread that holds one (steps that only compute) writes on it, in flight."""
    return db.connection is None and batched.wanted() and in_flight.overlapping_allowed(db)


def _hand(db: Any, lease: Lease, step: str, now: datetime, expires: datetime | None, *,
          checkpoint: batched.Checkpoint | None = None, calls: Sequence[batched.RecordedCall] = ()) -> None:
    """After the run's write before it is confirmed (it is fenced on what that one set), the write goes to the
    process's writer; its outcome is read where this thread's own statement would have been."""
    in_flight.settle(db)
    write = lease.handed = batched.hand(batched.Write(lease.run_id, lease.token, lease.seq, step, expires, now,
                                                      checkpoint, calls))
    in_flight.later(db, partial(_confirm_batched, lease, write))


def _joined(lease: Lease, step: str, checkpoint: batched.Checkpoint, expires: datetime | None) -> bool:
    """The step's checkpoint added to the run's last write still waiting for the writer (its activity's result,
    this visit's): their one outcome, read as that write's was to be, holds for both."""
    write = lease.handed
    return (write is not None and write.visit == lease.seq and write.step == step
            and batched.join(write, checkpoint, expires))


def _confirm_batched(lease: Lease, write: batched.Write) -> None:
    """A batched write's outcome, read where the thread's own write would have been: LeaseLost unless its
    fence held, and the pause it found noted on the lease."""
    if not write.outcome().held:
        raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")
    if write.pause_asked:
        lease.pause_asked = True


def _prefetched(run: Run, lease: Lease) -> Prefetched:
    """What the claim statement read beside the run: its newest checkpoint, its recorded results. The lease
    learns the newest checkpoint's state (its next checkpoint stores what changed)."""
    extra = {name: getattr(run, name) for name in _CLAIM_EXTRAS}  # set by name by RowReader.instance
    point = None
    if extra["resume_chain"] is not None:  # the checkpoint at the run's checkpoint_seq exists
        state, lease.chain = resumed(_json(extra["resume_chain"]))
        point = ResumePoint(run.checkpoint_seq, extra["resume_next_step"], state, extra["resume_schema_version"])
    return Prefetched(point, values.resolved_calls([RecordedCall(*row) for row in _json(extra["resume_calls"]) or []]),
                      extra["resume_next_step"])


def _recorded(rows: Iterable[Sequence[Any]]) -> list[RecordedCall]:
    """(call_index, name, result as jsonb text) rows, in call_index order."""
    return values.resolved_calls([RecordedCall(index, name, _json(result)) for index, name, result in rows])


def _check_fence(lease: Lease, rowcount: int) -> None:
    if rowcount != 1:
        raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")


def _step_checked(db: Any, lease: Lease) -> Callable[[Any], None]:
    """What a step's write in flight does with its result: LeaseLost unless it wrote its one row, and the pause
    asked for the run as the write found it noted on the lease (durable/runtime/pausing.py)."""
    def checked(result: Any) -> None:
        _check_fence(lease, in_flight.rowcount(result))
        _note_pause(lease, in_flight.first_row(db, result))
    return checked


def _note_pause(lease: Lease, row: tuple[Any, ...] | None) -> None:
    if row is not None and row[0]:
        lease.pause_asked = True


def _fence_checked(lease: Lease) -> Callable[[Any], None]:
    """What a fenced write in flight does with its result: LeaseLost unless it wrote its one row."""
    return lambda result: _check_fence(lease, in_flight.rowcount(result))


def _send_behind(db: Any, statement: in_flight.PreparedWrite, params: dict[str, Any]) -> Any:
    """Queue the statement behind the write in flight, read both (the earlier one's refusal raises
    first), and return the statement's result."""
    write = in_flight.send(db, statement, params, prepare=durable_settings.DURABLE_PREPARE_STATEMENTS, behind=True)
    in_flight.settle(db)
    return write.result


def _step_params(lease: Lease, now: datetime, step: str, state: dict[str, Any], schema_version: int) -> dict[str, Any]:
    """A checkpoint's parameters: its state stored whole or as what changed (durable.store.checkpoints)."""
    stored, lease.chain = to_store(lease.chain, lease.seq + 1, state)
    return {"run_id": lease.run_id, "token": lease.token, "seq": lease.seq + 1, "step": step,
            "state": stored.full, "delta": stored.delta, "base": stored.base, "schema_version": schema_version,
            "now": now}


def _array_text(items: Iterable[Any]) -> str:
    """A Postgres array literal of uuids, integers or datetimes (None: NULL), cast by the statement: psycopg adapting
    a list looks at every element to choose its type, twice the CPU of this for the heartbeat's thousand leases."""
    return "{" + ",".join("NULL" if item is None else
                          f'"{item.isoformat() if isinstance(item, datetime) else item}"' for item in items) + "}"


def _fence_params(lease: Lease, now: datetime) -> dict[str, Any]:
    return {"run_id": lease.run_id, "token": lease.token, "seq": lease.seq, "now": now,
            "lease_expires_at": lease.renewal(now)}


def _column(name: str) -> str:
    """The ledger column of a SideEffect field; its fields are all concrete, none a relation's reverse side."""
    field = SideEffect._meta.get_field(name)
    if not isinstance(field, Field):
        raise TypeError(f"{name} is not a column of the ledger")
    return field.column


def _set_fields(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """`, column = %(set_column)s` for each ledger field, and its parameters. The columns come from
    the model, so nothing else reaches the SQL; JSON goes as the ORM would store it."""
    clause, params = "", {}
    for name, value in fields.items():
        column = _column(name)
        is_json = column in _JSON_COLUMNS
        clause += f", {column} = %(set_{column})s" + ("::jsonb" if is_json else "")
        params[f"set_{column}"] = _jsonb(value) if is_json else value
    return clause, params


def _jsonb(value: Any) -> str | None:
    """What the ORM's JSONField stores: SQL NULL for None, JSON text otherwise."""
    return None if value is None else json.dumps(value)


def _json(text: str | None) -> Any:
    """A jsonb column as the ORM's JSONField gives it: Django's cursor hands jsonb back as text."""
    return None if text is None else json.loads(text)
