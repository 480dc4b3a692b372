"""A step's write in flight while the next step runs: libpq's pipeline mode, one write at a time.

A step write is one fenced statement whose wait is mostly Postgres's commit (the WAL flush), while
the worker's share of a step (the executor, the step's code, building the next write) is about
as long again. Sending the write and reading its result only when something depends on it lets
the two overlap. Nothing leaves the process on an unconfirmed write:

- the next store write, an activity's or a downstream's call (durable.runtime.heartbeat.lease_kept), and
  any other use of the connection (a Django query, a transaction) read the result first, and a
  write the fence refused raises LeaseLost there, before anything else is sent;
- the write itself is fenced like every other (token, RUNNING, checkpoint seq): a worker that lost
  its lease commits nothing, and what it computed in the meantime is never written.

So a crash or a lost lease costs at most the pure code of one step, which runs again on resume,
as it would had the crash come just before a synchronous write's commit.

A write whose result is needed at once (the run's finish, a side effect's Prepare, which returns the
ledger row) is queued behind the step's write still in flight, and the two are read together: one
wait where there were two. Each write is its own transaction (a sync after each); each is fenced on
the checkpoint seq the one before it sets, so a refusal refuses all that were queued behind it.

The statements go through libpq directly (psycopg's public `pq` wrapper), prepared once per
connection under their own names, with their parameters as text: psycopg's cursor cannot leave a
result unread, and its pipeline mode would run every other query of the step in that mode too. The
pipeline is left as soon as the writes are read: every other query sees psycopg's connection.
"""
from __future__ import annotations

import re
import select
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import errors, pq
from psycopg.adapt import Transformer

from durable.store.health import note_proven

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_WRITES: list[PreparedWrite] = []  # every statement that may go in flight, in the order they were declared
_PIPELINE_MODE = pq.version() >= 140000  # libpq 14; psycopg's binary package ships a newer one
_UNDEFINED = "26000"  # psycopg deallocates every prepared statement after a rollback


@dataclass(frozen=True)
class PreparedWrite:
    """A write statement as libpq takes it: `$n` placeholders, each parameter's type by OID."""

    name: bytes
    sql: bytes
    params: tuple[str, ...]
    types: tuple[int, ...]
    text: str  # the SQL as execute wrappers see it

    @classmethod
    def of(cls, name: str, sql: str, types: Mapping[str, int]) -> PreparedWrite:
        """From the store's `%(name)s` SQL; each name becomes one `$n`, however often it appears."""
        order: list[str] = []

        def positional(match: re.Match[str]) -> str:
            if match[1] not in order:
                order.append(match[1])
            return f"${order.index(match[1]) + 1}"

        sql_positional = re.sub(r"%\((\w+)\)s", positional, sql)
        write = cls(name.encode(), sql_positional.encode(), tuple(order), tuple(types[name] for name in order),
                    sql_positional)
        _WRITES.append(write)  # prepared together: one may be queued behind another, when nothing can be prepared
        return write

    def values(self, params: Mapping[str, Any]) -> list[bytes | None]:
        return [_text(params[name]) for name in self.params]


class InFlight:
    """One write sent on a connection whose result is not read yet."""

    def __init__(self, statement: PreparedWrite, values: list[bytes | None],
                 on_result: Callable[[pq.abc.PGresult], None] | None, *, prepared: bool) -> None:
        self.statement = statement
        self.values = values
        self.on_result = on_result
        self.prepared = prepared
        self.result: pq.abc.PGresult | None = None

    def read(self, pgconn: pq.abc.PGconn) -> None:
        """Its result, then the sync that ends it (each write is its own transaction: one sync each)."""
        self.result = _last_result(pgconn)
        sync = _next_result(pgconn)
        assert sync is not None and sync.status == pq.ExecStatus.PIPELINE_SYNC, "a write in flight lost its sync"

    def undefined(self) -> bool:
        """Refused because a rollback dropped the connection's prepared statements meanwhile."""
        return self.result is not None and self.result.status not in _OK and _sqlstate(self.result) == _UNDEFINED

    def again(self, db: BaseDatabaseWrapper) -> None:
        """Send it once more and wait: prepared anew, outside any pipeline."""
        pgconn = db.connection.pgconn
        if self.prepared:
            _prepare(db, self.statement, again=True)
            self.result = pgconn.exec_prepared(self.statement.name, self.values)
        else:
            self.result = pgconn.exec_params(self.statement.sql, self.values, self.statement.types)

    def outcome(self) -> None:
        """Hand its result to `on_result`, if any (which may raise LeaseLost); a failed statement raises
        as Django's database errors do (the caller wraps them)."""
        assert self.result is not None
        if self.result.status not in _OK:
            raise errors.error_from_result(self.result)
        if self.on_result is not None:
            self.on_result(self.result)


def rowcount(result: pq.abc.PGresult) -> int:
    """How many rows the statement wrote (or returned)."""
    return result.command_tuples or 0


def first_row(db: BaseDatabaseWrapper, result: pq.abc.PGresult) -> tuple[Any, ...] | None:
    """The result's first row as psycopg's cursor would give it (the connection's loaders), or None."""
    if result.ntuples == 0:
        return None
    transformer = Transformer.from_context(db.connection)
    transformer.set_pgresult(result)
    return transformer.load_row(0, tuple)


class _Queue:
    """The writes in flight on one connection, in the order they were sent, in libpq's pipeline mode."""

    def __init__(self, pgconn: pq.abc.PGconn) -> None:
        self.pgconn = pgconn
        self.writes: list[InFlight] = []


def send(db: BaseDatabaseWrapper, statement: PreparedWrite, params: Mapping[str, Any],
         on_result: Callable[[pq.abc.PGresult], None] | None = None, *, prepare: bool = True,
         behind: bool = False) -> InFlight:
    """Send the write and return at once; its result is read by the next `settle` on this connection,
    which hands it to `on_result` and keeps it on the returned write.

    The write in flight before it is settled first, unless `behind`: then it is queued after that one
    (libpq's pipeline mode) and the next `settle` reads both, in order. Queued writes are fenced on the
    checkpoint seq each one before them sets, so one that was refused refuses all after it.
    `prepare=False` sends it unnamed, parsed each time (behind a transaction-pooling PgBouncer), and never
    queued: a pooler may hand two queued transactions to two server sessions, and the second must not
    start before the first has committed."""
    first(db)  # a batched step write before it: confirmed first, since this write is fenced on what that one set
    if not behind or not prepare:
        settle(db)
    db.ensure_connection()
    queue = _queue(db)
    values = statement.values(params)

    def send_only(sql: str, params: Any, many: bool, context: dict[str, Any]) -> None:
        pgconn = queue.pgconn
        if not queue.writes:  # the connection is idle: prepare what may be queued, then enter the pipeline
            if prepare:
                for write in _WRITES:
                    _prepare(db, write)
            pgconn.enter_pipeline_mode()
        if prepare:
            pgconn.send_query_prepared(statement.name, values)
        else:
            pgconn.send_query_params(statement.sql, values, statement.types)
        pgconn.pipeline_sync()
        while pgconn.flush():  # 1 while libpq still holds some of it (a non-blocking connection)
            _wait(pgconn, write=True)

    with db.wrap_database_errors:
        wrapped(db, send_only)(statement.text, params, False, {"connection": db, "cursor": None})
    write = InFlight(statement, values, on_result, prepared=prepare)
    queue.writes.append(write)
    db._durable_in_flight = queue  # type: ignore[attr-defined]  # durable's state kept on Django's connection
    return write


def _queue(db: BaseDatabaseWrapper) -> _Queue:
    queue: _Queue | None = getattr(db, "_durable_in_flight", None)
    if queue is None or queue.pgconn is not db.connection.pgconn:
        return _Queue(db.connection.pgconn)
    return queue


def wrapped(db: BaseDatabaseWrapper, execute: Callable[..., Any]) -> Callable[..., Any]:
    """`execute` inside the connection's execute wrappers, as Django's cursor calls them (they count,
    log or time what is sent: the benchmark counts commits with one), but for the one that settles
    writes in flight: a write sent behind another must not wait for it."""
    for wrapper in reversed(db.execute_wrappers):
        if not getattr(wrapper, "settles_in_flight", False):
            execute = partial(wrapper, execute)
    return execute


def later(db: BaseDatabaseWrapper, action: Callable[[], None]) -> None:
    """Run `action` before anything else uses this thread's connection (its next `settle`): the outcome of a write
    handed to another connection (durable/store/batched.py), read. One at a time: one left before it runs first."""
    first(db)
    db._durable_later = action  # type: ignore[attr-defined]  # durable's state kept on Django's connection


def first(db: BaseDatabaseWrapper) -> None:
    """What `later` left to do, if anything; run once, even when it raises (LeaseLost)."""
    action: Callable[[], None] | None = getattr(db, "_durable_later", None)
    if action is not None:
        db._durable_later = None  # type: ignore[attr-defined]  # durable's state kept on Django's connection
        action()


def settle(db: BaseDatabaseWrapper) -> None:
    """Read the results of the writes in flight on this connection, if there are any, and leave the
    pipeline: the connection is psycopg's again. The first refusal or error raises, once all are read.
    What `later` left to do comes first."""
    first(db)
    queue: _Queue | None = getattr(db, "_durable_in_flight", None)
    if queue is None or not queue.writes:
        return
    db._durable_in_flight = None  # type: ignore[attr-defined]  # durable's state kept on Django's connection
    if db.connection is None or db.connection.pgconn is not queue.pgconn:
        return  # closed meanwhile: the next fenced write finds out if it committed, or a resume from what did
    with db.wrap_database_errors:
        for write in queue.writes:
            write.read(queue.pgconn)
        queue.pgconn.exit_pipeline_mode()
        _send_again_from_first_undefined(db, queue.writes)
        note_proven(db)
        for write in queue.writes:
            write.outcome()


def _send_again_from_first_undefined(db: BaseDatabaseWrapper, writes: list[InFlight]) -> None:
    """A write whose prepared statement a rollback dropped did nothing, so every write queued after it was
    refused by its fence: send them all again, in order, and wait for each."""
    first = next((index for index, write in enumerate(writes) if write.undefined()), None)
    if first is not None:
        for write in writes[first:]:
            write.again(db)


def overlapping_allowed(db: BaseDatabaseWrapper) -> bool:
    """Inside `overlapping`, in autocommit (a caller's transaction gains nothing from it, and a statement
    that fails there cannot be sent again), and while queries are not being logged (tests, DEBUG)."""
    return (getattr(db, "_durable_overlapping", False) and not db.in_atomic_block and not db.queries_logged
            and _PIPELINE_MODE)


@contextmanager
def overlapping(db: BaseDatabaseWrapper) -> Iterator[None]:
    """Within: step writes may be left in flight, and every other use of the connection settles them first.

    Django's queries pass its execute wrappers; a transaction starts by turning autocommit off,
    which psycopg refuses while a result is unread, so that is settled first too. On the way out
    the last write is settled: nothing is left in flight past the task.
    """
    def settle_first(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        settle(db)
        return execute(sql, params, many, context)
    settle_first.settles_in_flight = True  # type: ignore[attr-defined]  # a mark on the function wrapped() looks for

    def set_autocommit(autocommit: bool) -> None:
        settle(db)
        unguarded(autocommit)

    unguarded = db._set_autocommit  # type: ignore[attr-defined]  # django-stubs omits the backends' private hook
    outer = (db.__dict__.get("_set_autocommit"), getattr(db, "_durable_overlapping", False))  # a scope inside another
    db._set_autocommit = set_autocommit  # type: ignore[attr-defined]  # shadowed on this instance only
    db._durable_overlapping = True  # type: ignore[attr-defined]  # durable's state kept on Django's connection
    try:
        with db.execute_wrapper(settle_first):
            yield
            settle(db)
    finally:
        db._durable_overlapping = outer[1]  # type: ignore[attr-defined]  # durable's state kept on Django's connection
        if outer[0] is None:
            del db._set_autocommit  # type: ignore[attr-defined]  # the instance attribute: the class's method shows through again
        else:
            db._set_autocommit = outer[0]  # type: ignore[attr-defined]  # the outer scope's guard
        if getattr(db, "_durable_in_flight", None) is not None or getattr(db, "_durable_later", None):
            # Leaving on an error: read what is in flight, send what was kept back, keep that error.
            try:
                settle(db)
            except Exception:  # noqa: BLE001 - the error on its way out says more
                pass


def _prepare(db: BaseDatabaseWrapper, statement: PreparedWrite, *, again: bool = False) -> None:
    # Kept on psycopg's connection, not Django's: from a pool, a thread's next connection may be one another
    # thread prepared these on, and the server refuses a name prepared twice.
    raw = db.connection
    prepared: set[bytes] | None = getattr(raw, "_durable_prepared_writes", None)
    if prepared is None:
        prepared = set()
        raw._durable_prepared_writes = prepared  # durable's state kept on psycopg's connection
    if statement.name in prepared and not again:
        return
    result = raw.pgconn.prepare(statement.name, statement.sql, statement.types)
    if result.status not in _OK:
        raise errors.error_from_result(result)
    prepared.add(statement.name)


def _next_result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult | None:
    """libpq's next result, once it has read all of it."""
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            return pgconn.get_result()
        _wait(pgconn, write=False)


def _last_result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """A statement's last result (libpq ends each statement's results with None)."""
    last = None
    while (result := _next_result(pgconn)) is not None:
        last = result
    assert last is not None, "a write was in flight but no result came"
    return last


def _wait(pgconn: pq.abc.PGconn, *, write: bool) -> None:
    fd = pgconn.socket
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLOUT if write else select.POLLIN)
        poller.poll()
    else:  # Windows
        select.select([] if write else [fd], [fd] if write else [], [])


def _sqlstate(result: pq.abc.PGresult) -> str:
    return (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()


def _text(value: Any) -> bytes | None:
    """A parameter in Postgres's text format (the statement's types say how the server reads it)."""
    if value is None:
        return None
    to_text = _TO_TEXT.get(type(value))
    return to_text(value) if to_text is not None else str(value).encode()


_TO_TEXT: dict[type, Callable[[Any], bytes]] = {
    str: str.encode,
    bool: lambda value: b"true" if value else b"false",
    datetime: lambda value: value.isoformat().encode(),
}
