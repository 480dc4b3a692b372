"""The writes of all the runs a process advances, batched: one statement, one commit, for every write waiting.

A process advancing hundreds of runs at once (Celery's threads pool) made one statement and one commit for each
step's checkpoint and each activity's result of each run, each on a pooled connection its thread waited for.
Here a run's thread hands the write to the process's writer thread and goes on; the writer sends every write
handed to it meanwhile as one statement on a connection of its own, and each thread reads its write's outcome
where it would have read its own statement's (durable/store/in_flight.py: before its next write, call or query).
So a step of a run that waits on a model holds no pooled connection at all, and Postgres commits once a batch.
An activity's result is handed over the moment it answers, as before: a worker killed after that batch
committed never asks again.

Each write in the batch is fenced as a lone write is (token, RUNNING, the checkpoint seq its visit started from):
the statement's UPDATE returns the runs whose fence held, and only those get their journal and checkpoint rows,
all in the one statement, so a write whose lease was lost writes nothing while the others commit. A run has at
most one write in the writer (its thread reads the outcome before it hands the next); a step's checkpoint handed
before the writer took the step's activity result joins it instead (`join`), one write where two would go one
after the other (durable_bench --agents 2000: 17.0 s against 18.1, medians of three). A batch that fails as a
whole (a deadlock with another process's batch, a value Postgres refuses) is sent again one write at a time:
each write gets its own outcome, and only the write at fault fails.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from durable.conf import durable_settings
from durable.store.pooling import pool_size
from durable.store.statements import run_statement

log = logging.getLogger("durable.store")

MAX_WRITES = 500  # per statement: a batch's JSON stays a few MB at most (large values are stored apart)
CLOSE_WAIT_SECONDS = 10.0  # close() waits at most this long for the batch being sent
IDLE_SECONDS = 60.0  # the writer keeps its connection while writes came within this long (a new one is a new backend)

# The writes arrive as one JSON array; each one's state, difference and recorded calls are JSON inside it. A write
# is fenced on the checkpoint seq its visit started from (`visit`); a step's write adds the checkpoint after it.
_BATCH_SQL = """
WITH writes AS (
    SELECT * FROM jsonb_to_recordset(%(writes)s::jsonb) AS write(
        run_id uuid, token bigint, visit int, checkpoint boolean, step text, next_step text, state jsonb,
        delta jsonb, base int, schema_version int, lease_expires_at timestamptz, created_at timestamptz, calls jsonb)
), fenced AS (
    UPDATE durable_run AS run
       SET checkpoint_seq = CASE WHEN writes.checkpoint THEN writes.visit + 1 ELSE run.checkpoint_seq END,
           current_step = CASE WHEN writes.checkpoint THEN writes.next_step ELSE run.current_step END,
           attempt = CASE WHEN writes.checkpoint THEN 0 ELSE run.attempt END,
           lease_expires_at = COALESCE(writes.lease_expires_at, run.lease_expires_at)
      FROM writes
     WHERE run.id = ANY(%(runs)s::uuid[]) AND run.id = writes.run_id AND run.fencing_token = writes.token
       AND COALESCE(run.status, '') = 'RUNNING' AND run.checkpoint_seq = writes.visit
 RETURNING run.id, run.pause_requested_at
), recorded AS (
    INSERT INTO durable_journalentry (run_id, kind, step, visit, call_index, name, result, fencing_token, created_at)
    SELECT writes.run_id, 'activity', writes.step, writes.visit, call.call_index, call.name, call.result,
           writes.token, writes.created_at
      FROM writes JOIN fenced ON fenced.id = writes.run_id
           CROSS JOIN jsonb_to_recordset(writes.calls) AS call(call_index int, name text, result jsonb)
), checkpoints AS (
    INSERT INTO durable_checkpoint (run_id, seq, step, next_step, state, delta, base, state_schema_version, created_at)
    SELECT writes.run_id, writes.visit + 1, writes.step, writes.next_step, writes.state, writes.delta, writes.base,
           writes.schema_version, writes.created_at
      FROM writes JOIN fenced ON fenced.id = writes.run_id
     WHERE writes.checkpoint
)
SELECT id, pause_requested_at IS NOT NULL FROM fenced
"""


@dataclass(frozen=True)
class RecordedCall:
    """An activity's result, recorded under its index in its visit."""

    call_index: int
    name: str
    result: str  # JSON text, its large values already stored apart (durable/store/values.py)

    def as_json(self) -> str:
        return f'{{"call_index":{self.call_index},"name":{json.dumps(self.name)},"result":{self.result}}}'


@dataclass
class Checkpoint:
    """What a step's write adds after its visit: the step taken, where the run goes next, its state."""

    next_step: str
    state: str | None  # JSON texts, as durable.store.checkpoints stores them
    delta: str | None
    base: int | None
    schema_version: int


@dataclass
class Write:
    """One run's write, handed to the writer: an activity's result, or a step's checkpoint. Its outcome is set
    once the batch that carried it is read."""

    run_id: UUID
    token: int
    visit: int  # the checkpoint seq the visit started from: the write is fenced on it
    step: str
    lease_expires_at: datetime | None
    created_at: datetime
    checkpoint: Checkpoint | None = None
    calls: Sequence[RecordedCall] = ()
    taken: bool = False  # the writer took it into a batch: nothing more joins it
    held: bool = False  # its fence held: everything in it is written
    pause_asked: bool = False  # a pause was asked for the run, as the write found it
    error: BaseException | None = None  # the statement failed (sent alone): the error the thread raises
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def as_json(self) -> str:
        point = self.checkpoint
        moved = "false" if point is None else (
            f'true,"next_step":{json.dumps(point.next_step)},"state":{point.state or "null"},'
            f'"delta":{point.delta or "null"},"base":{_json(point.base)},"schema_version":{point.schema_version}')
        return "".join((
            f'{{"run_id":"{self.run_id}","token":{self.token},"visit":{self.visit},"step":{json.dumps(self.step)},',
            f'"lease_expires_at":{_json(self.lease_expires_at and self.lease_expires_at.isoformat())},',
            f'"created_at":"{self.created_at.isoformat()}","calls":[{",".join(c.as_json() for c in self.calls)}],',
            f'"checkpoint":{moved}}}'))

    def outcome(self) -> Write:
        """Wait for the batch that carried it; the statement's error, if it failed, raises here."""
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self


def _json(value: Any) -> str:
    return "null" if value is None else json.dumps(value)


def wanted() -> bool:
    """Writes go to the writer in a process whose connections come from a pool (its runs share them), unless
    DURABLE_BATCH_STEP_WRITES is off."""
    return bool(durable_settings.DURABLE_BATCH_STEP_WRITES) and pool_size() > 0


def own_connection() -> BaseDatabaseWrapper:
    """A connection of the writer's own, outside the process's pool: the threads waiting for their writes may
    hold every pooled connection (a run whose steps make no call keeps its own), and the writer must not wait
    for one of them. The project's worker takes it from DURABLE_DB_POOL_SIZE (its pool is one smaller)."""
    default = connections[DEFAULT_DB_ALIAS]
    settings = {**default.settings_dict, "OPTIONS": {key: value for key, value in
                                                     default.settings_dict.get("OPTIONS", {}).items() if key != "pool"}}
    return type(default)(settings, DEFAULT_DB_ALIAS)


class _Writer:
    """The process's one writer thread: takes every write handed to it since its last statement, sends them as
    one. It keeps its connection while writes keep coming, and closes it when idle."""

    def __init__(self) -> None:
        self._arrived = threading.Condition()
        self._waiting: list[Write] = []
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._close_asked = threading.Event()
        self._closed = threading.Event()
        self.db: BaseDatabaseWrapper | None = None  # the writer's connection (the benchmark reads its backend)
        self.statements = 0  # statements sent, each its own commit (the benchmark counts commits)

    def hand(self, write: Write) -> Write:
        with self._arrived:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                if self._pid != os.getpid():  # a forked pool child inherits no threads: it starts its own
                    self._waiting = []  # the parent's writes are not this process's
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="durable-step-writer", daemon=True)
                self._thread.start()
            self._waiting.append(write)
            if len(self._waiting) == 1:
                self._arrived.notify()
        return write

    def join(self, write: Write, checkpoint: Checkpoint, lease_expires_at: datetime | None) -> bool:
        """Add a step's checkpoint to the run's activity result still waiting unsent (the step returned before the
        writer took it): one write, fenced as both would be, where two would have gone one after the other."""
        with self._arrived:
            if write.taken or write.checkpoint is not None:
                return False
            write.checkpoint = checkpoint
            write.lease_expires_at = lease_expires_at or write.lease_expires_at
            return True

    def _run(self) -> None:
        db = self.db = own_connection()
        while True:
            with self._arrived:
                if not self._waiting and not self._close_asked.is_set():
                    self._arrived.wait(IDLE_SECONDS)
                batch, self._waiting = self._waiting[:MAX_WRITES], self._waiting[MAX_WRITES:]
                for write in batch:
                    write.taken = True
            if batch:
                send(batch, db)
                continue
            try:
                db.close()  # no writes for a while, or asked to: hold no connection
            except Exception:  # noqa: BLE001 - a connection that fails to close is dropped all the same
                log.warning("the writer's connection did not close cleanly", exc_info=True)
            self._close_asked.clear()
            self._closed.set()
            with self._arrived:
                while not self._waiting and not self._close_asked.is_set():
                    self._arrived.wait()

    def close(self) -> None:
        """Close the writer's connection once the writes handed to it are sent (a test session's end, before its
        database is dropped); the next write opens a new one."""
        with self._arrived:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                return
            self._closed.clear()
            self._close_asked.set()
            self._arrived.notify()
        self._closed.wait(CLOSE_WAIT_SECONDS)


def send(batch: list[Write], db: BaseDatabaseWrapper | None = None) -> None:
    """One statement for the batch; when it fails as a whole, one statement per write, each its own outcome.
    Without `db`, on a connection opened for it and closed after."""
    if db is None:
        own = own_connection()
        try:
            send(batch, own)
        finally:
            own.close()
        return
    try:
        _send(batch, db)
    except DatabaseError as exc:
        db.close_if_unusable_or_obsolete()
        if len(batch) == 1:
            batch[0].error = exc
            batch[0].done.set()
            return
        log.warning("a batch of %d writes failed (%s); sending them one at a time", len(batch), exc)
        for write in batch:
            send([write], db)
    except BaseException as exc:  # noqa: BLE001 - the writer goes on; each thread raises its write's error
        for write in batch:
            write.error = exc
            write.done.set()


def _send(batch: list[Write], db: BaseDatabaseWrapper) -> None:
    # The runs' ids again, as an array: the plan finds each run by its key. Joined on the JSON's rows alone, or
    # with a status the RUNNING runs' partial index matches (hence the COALESCE), it scanned every running run's
    # row, dead versions and all: 6 ms a statement in durable_bench, where a lone step write takes 0.3.
    _, rows = run_statement(_BATCH_SQL, {"writes": "[" + ",".join(write.as_json() for write in batch) + "]",
                                         "runs": "{" + ",".join(str(write.run_id) for write in batch) + "}"}, "all", db)
    _writer.statements += 1  # by the writer's thread (or a test's): a plain int will do
    held = {str(run_id): paused for run_id, paused in rows}
    for write in batch:
        key = str(write.run_id)
        write.held = key in held
        write.pause_asked = bool(held.get(key))
        write.done.set()


_writer = _Writer()


def backend_pid() -> int | None:
    """The Postgres backend behind the writer's connection, while it has one open (the benchmark's CPU meter)."""
    db = _writer.db
    raw = db.connection if db is not None else None
    return None if raw is None else raw.info.backend_pid


def statements_sent() -> int:
    """How many batches this process's writer sent (each a commit: the benchmark counts them)."""
    return _writer.statements


def close() -> None:
    """Close the process's writer's connection (it opens a new one for its next write)."""
    _writer.close()


def hand(write: Write) -> Write:
    """Hand a write to the process's writer; read it with `outcome()`."""
    return _writer.hand(write)


def join(write: Write, checkpoint: Checkpoint, lease_expires_at: datetime | None) -> bool:
    """`checkpoint` added to `write` when the writer has not taken it yet; False: hand it on its own."""
    return _writer.join(write, checkpoint, lease_expires_at)
