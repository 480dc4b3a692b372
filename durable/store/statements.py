"""How the Postgres run store sends its statements: prepared on the server, on one cursor kept per connection.

The executor runs the same few statements again and again (the claim, a step's write, the ledger's
moves), so their parse and plan are kept (psycopg's prepared statements) and so is their cursor;
everything else in the project keeps Django's cursor and plans made for its values.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Literal

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from durable.conf import durable_settings
from durable.store.health import check_unless_proven, note_proven
from durable.store.in_flight import settle, wrapped


@contextmanager
def prepared(db: BaseDatabaseWrapper | None = None) -> Iterator[None]:
    """The statements run inside are prepared on the server at their first run on this connection and reused
    after: the executor's few statements, run again and again, skip parsing and planning (a step write 0.47 ->
    0.35 ms, docs/benchmarks-log.md). Only these: the console's queries keep custom plans for the values they are
    given. With client-side binding (Django's default) psycopg prepares nothing, and this changes nothing."""
    if not durable_settings.DURABLE_PREPARE_STATEMENTS:
        yield
        return
    db = connection if db is None else db
    db.ensure_connection()
    raw = db.connection
    unprepared = raw.prepare_threshold
    raw.prepare_threshold = 0  # psycopg: prepare from the first run
    try:
        yield
    finally:
        raw.prepare_threshold = unprepared


Fetch = Literal["none", "one", "all"]


def run_statement(sql: str, params: Any, fetch: Fetch = "none", db: BaseDatabaseWrapper | None = None
                  ) -> tuple[int, Any]:
    """Run one of the store's statements: (rowcount, the row or rows fetched).

    On a psycopg cursor kept for the connection (per thread, as Django's connections are), inside
    `prepared`: a Django cursor per statement, its wrapper and the context manager cost about
    0.05 ms of the worker's CPU a statement, a tenth of a step here. What Django's cursor does that
    matters is kept: the health check (unless a statement came back moments ago: durable.store.health)
    and reconnect (ensure_connection), errors as django.db's (callers such as the heartbeat catch
    DatabaseError), the broken-transaction check, and the connection's execute wrappers (the benchmark
    counts commits with one). When queries are logged (DEBUG, tests' force_debug_cursor) it goes
    through Django's cursor, so they are logged. `db`: a connection other than the thread's (the process's
    writer keeps one of its own, durable/store/batched.py).
    """
    db = connections[DEFAULT_DB_ALIAS] if db is None else db  # given: a connection of its own (the writer's)
    settle(db)  # a step's write still in flight: its result first, LeaseLost if it was refused
    if db.queries_logged:
        with prepared(db), db.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.rowcount, _fetched(cursor, fetch)
    check_unless_proven(db)
    db.ensure_connection()
    raw = db.connection
    kept: tuple[Any, Any] | None = getattr(db, "_durable_cursor", None)
    if kept is None or kept[0] is not raw or kept[1].closed:  # a new connection: a new cursor
        with db.wrap_database_errors:
            kept = (raw, db.create_cursor())
        db._durable_cursor = kept  # type: ignore[attr-defined]  # durable's state kept on Django's connection
    cursor = kept[1]
    db.validate_no_broken_transaction()
    with prepared(db), db.wrap_database_errors:
        if db.execute_wrappers:
            wrapped(db, partial(_execute_on, cursor))(sql, params, False, {"connection": db, "cursor": cursor})
        else:
            cursor.execute(sql, params)
        found = cursor.rowcount, _fetched(cursor, fetch)
    note_proven(db)
    return found


def _execute_on(cursor: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """An execute wrapper's innermost call, as Django's cursor makes it."""
    return cursor.execute(sql, params)


def _fetched(cursor: Any, fetch: Fetch) -> Any:
    if fetch == "one":
        return cursor.fetchone()
    if fetch == "all":
        return cursor.fetchall()
    return None
