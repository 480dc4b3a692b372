"""A step's write in flight while the next step runs: libpq's asynchronous query, one per connection.

A step write is one fenced statement whose wait is mostly Postgres's commit (the WAL flush), while
the worker's share of a step (the executor, the step's code, building the next write) is about
as long again. Sending the write and reading its result only when something depends on it lets
the two overlap. Nothing leaves the process on an unconfirmed write:

- the next store write, an activity's or a downstream's call (durable.heartbeat.lease_kept), and
  any other use of the connection (a Django query, a transaction) read the result first, and a
  write the fence refused raises LeaseLost there, before anything else is sent;
- the write itself is fenced like every other (token, RUNNING, checkpoint seq): a worker that lost
  its lease commits nothing, and what it computed in the meantime is never written.

So a crash or a lost lease costs at most the pure code of one step, which runs again on resume,
as it would had the crash come just before a synchronous write's commit.

The statement goes through libpq directly (psycopg's public `pq` wrapper), prepared once per
connection under its own name, with its parameters as text: psycopg's cursor cannot leave a result
unread, and its pipeline mode would run every other query of the step in that mode too.
"""
from __future__ import annotations

import re
import select
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from datetime import datetime
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import errors, pq

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_UNDEFINED_STATEMENT = "26000"  # psycopg deallocates every prepared statement after a rollback


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
        return cls(name.encode(), sql_positional.encode(), tuple(order), tuple(types[name] for name in order),
                   sql_positional)

    def values(self, params: Mapping[str, Any]) -> list[bytes | None]:
        return [_text(params[name]) for name in self.params]


class InFlight:
    """One write sent on a connection whose result is not read yet."""

    def __init__(self, db: BaseDatabaseWrapper, statement: PreparedWrite, values: list[bytes | None],
                 on_result: Callable[[int], None], *, prepared: bool) -> None:
        self.db = db
        self.pgconn = db.connection.pgconn
        self.statement = statement
        self.values = values
        self.on_result = on_result
        self.prepared = prepared

    def settle(self) -> None:
        """Wait for the result and hand its row count to `on_result` (which may raise LeaseLost);
        a failed statement raises as Django's database errors do."""
        with self.db.wrap_database_errors:
            result = _result(self.pgconn)
            if result.status not in _OK and self.prepared and _sqlstate(result) == _UNDEFINED_STATEMENT:
                _prepare(self.db, self.statement, again=True)  # dropped by a rollback meanwhile: once more, now
                result = self.pgconn.exec_prepared(self.statement.name, self.values)
            if result.status not in _OK:
                raise errors.error_from_result(result)
        self.on_result(result.command_tuples or 0)


def send(db: BaseDatabaseWrapper, statement: PreparedWrite, params: Mapping[str, Any],
         on_result: Callable[[int], None], *, prepare: bool = True) -> None:
    """Send the write and return at once; its result is read by the next `settle` on this connection.

    `prepare=False` sends it unnamed, parsed each time (behind a transaction-pooling PgBouncer)."""
    settle(db)
    db.ensure_connection()
    values = statement.values(params)

    def send_only(sql: str, params: Any, many: bool, context: dict[str, Any]) -> None:
        pgconn = db.connection.pgconn
        if prepare:
            _prepare(db, statement)
            pgconn.send_query_prepared(statement.name, values)
        else:
            pgconn.send_query_params(statement.sql, values, statement.types)
        while pgconn.flush():  # 1 while libpq still holds some of it (a non-blocking connection)
            _wait(pgconn, write=True)

    with db.wrap_database_errors:
        wrapped(db, send_only)(statement.text, params, False, {"connection": db, "cursor": None})
    db._durable_in_flight = InFlight(db, statement, values, on_result, prepared=prepare)  # type: ignore[attr-defined]


def wrapped(db: BaseDatabaseWrapper, execute: Callable[..., Any]) -> Callable[..., Any]:
    """`execute` inside the connection's execute wrappers, as Django's cursor calls them (they count,
    log or time what is sent: the benchmark counts commits with one)."""
    for wrapper in reversed(db.execute_wrappers):
        execute = partial(wrapper, execute)
    return execute


def settle(db: BaseDatabaseWrapper) -> None:
    """Read the result of the write in flight on this connection, if there is one."""
    in_flight: InFlight | None = getattr(db, "_durable_in_flight", None)
    if in_flight is None:
        return
    db._durable_in_flight = None  # type: ignore[attr-defined]
    if db.connection is None or db.connection.pgconn is not in_flight.pgconn:
        return  # closed meanwhile: the next fenced write finds out if it committed, or a resume from what did
    in_flight.settle()


def overlapping_allowed(db: BaseDatabaseWrapper) -> bool:
    """Inside `overlapping`, in autocommit (a caller's transaction gains nothing from it, and a statement
    that fails there cannot be sent again), and while queries are not being logged (tests, DEBUG)."""
    return getattr(db, "_durable_overlapping", False) and not db.in_atomic_block and not db.queries_logged


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

    def set_autocommit(autocommit: bool) -> None:
        settle(db)
        unguarded(autocommit)

    unguarded = db._set_autocommit
    outer = (db.__dict__.get("_set_autocommit"), getattr(db, "_durable_overlapping", False))  # a scope inside another
    db._set_autocommit = set_autocommit  # type: ignore[method-assign]
    db._durable_overlapping = True  # type: ignore[attr-defined]
    try:
        with db.execute_wrapper(settle_first):
            yield
            settle(db)
    finally:
        db._durable_overlapping = outer[1]  # type: ignore[attr-defined]
        if outer[0] is None:
            del db._set_autocommit  # the instance attribute: the class's method shows through again
        else:
            db._set_autocommit = outer[0]  # type: ignore[method-assign]
        if getattr(db, "_durable_in_flight", None) is not None:  # leaving on an error: read it, keep that error
            try:
                settle(db)
            except Exception:  # noqa: BLE001 - the error on its way out says more
                pass


def _prepare(db: BaseDatabaseWrapper, statement: PreparedWrite, *, again: bool = False) -> None:
    pgconn = db.connection.pgconn
    prepared: tuple[Any, set[bytes]] = getattr(db, "_durable_prepared_writes", (None, set()))
    if prepared[0] is not pgconn:
        prepared = (pgconn, set())
        db._durable_prepared_writes = prepared  # type: ignore[attr-defined]
    if statement.name in prepared[1] and not again:
        return
    result = pgconn.prepare(statement.name, statement.sql, statement.types)
    if result.status not in _OK:
        raise errors.error_from_result(result)
    prepared[1].add(statement.name)


def _result(pgconn: pq.abc.PGconn) -> pq.abc.PGresult:
    """The statement's last result, once libpq has read all of it."""
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            break
        _wait(pgconn, write=False)
    last = None
    while (result := pgconn.get_result()) is not None:
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
