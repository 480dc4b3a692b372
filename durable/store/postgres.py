"""Postgres run store: each step write is one fenced statement in autocommit, one round trip.

A data-modifying CTE updates the run only if this worker's fencing token still holds and
feeds the checkpoint INSERT from the updated row: no row, no checkpoint, nothing written.
"""
from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.utils import timezone

from durable.engine.errors import LeaseLost
from durable.engine.states import RunStatus
from durable.store.base import Lease, RunStore

_STEP_SQL = """
WITH fenced AS (
    UPDATE durable_run
       SET checkpoint_seq = %(seq)s, current_step = %(next_step)s, attempt = 0,
           status = %(status)s, output = %(output)s::jsonb, finished_at = %(finished_at)s,
           lease_owner = %(lease_owner)s, lease_expires_at = %(lease_expires_at)s, updated_at = %(now)s
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s - 1
 RETURNING id
)
INSERT INTO durable_checkpoint (run_id, seq, step, next_step, state, state_schema_version, created_at)
SELECT id, %(seq)s, %(step)s, %(next_step)s, %(state)s::jsonb, %(schema_version)s, %(now)s FROM fenced
"""

_ACTIVITY_SQL = """
WITH fenced AS (
    UPDATE durable_run SET lease_expires_at = %(lease_expires_at)s, updated_at = %(now)s
     WHERE id = %(run_id)s AND fencing_token = %(token)s AND status = 'RUNNING' AND checkpoint_seq = %(seq)s
 RETURNING id
)
INSERT INTO durable_journalentry (run_id, kind, step, call_index, name, result, fencing_token, created_at)
SELECT id, 'activity', %(step)s, %(call_index)s, %(name)s, %(result)s::jsonb, %(token)s, %(now)s FROM fenced
"""


class PostgresRunStore(RunStore):
    def _execute_fenced(self, sql: str, params: dict[str, Any], lease: Lease) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if cursor.rowcount != 1:
                raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")

    def _write_step(self, lease: Lease, step: str, next_step: str, state: dict[str, Any], schema_version: int,
                    *, finished: bool, output: Any = None) -> None:
        now = timezone.now()
        params = {
            "run_id": lease.run_id, "token": lease.token, "seq": lease.seq + 1, "step": step, "next_step": next_step,
            "state": json.dumps(state), "schema_version": schema_version, "now": now,
            "status": RunStatus.SUCCEEDED.value if finished else RunStatus.RUNNING.value,
            "output": json.dumps(output) if finished else None,
            "finished_at": now if finished else None,
            "lease_owner": None if finished else lease.owner,
            "lease_expires_at": None if finished else lease.expiry(now),
        }
        self._execute_fenced(_STEP_SQL, params, lease)
        lease.seq += 1

    def commit_step(self, lease: Lease, step: str, next_step: str, state: dict[str, Any], schema_version: int) -> None:
        self._write_step(lease, step, next_step, state, schema_version, finished=False)

    def finish(self, lease: Lease, step: str, state: dict[str, Any], schema_version: int, output: Any) -> None:
        self._write_step(lease, step, "", state, schema_version, finished=True, output=output)

    def record_activity(self, lease: Lease, step: str, call_index: int, name: str, result: Any) -> None:
        now = timezone.now()
        params = {
            "run_id": lease.run_id, "token": lease.token, "seq": lease.seq, "step": step, "call_index": call_index,
            "name": name, "result": json.dumps(result), "now": now, "lease_expires_at": lease.expiry(now),
        }
        self._execute_fenced(_ACTIVITY_SQL, params, lease)
