"""Django's connection health check, skipped for a connection a store statement came back on moments ago.

With CONN_HEALTH_CHECKS, Django sends `SELECT 1` before the first query of every request, and a worker's
task is one: one more round trip per run, each run being a claim, its steps and a finish (about 6% of a
busy worker's throughput, docs/benchmarks-log.md). A connection whose last statement came back less than
PROVEN_SECONDS ago is taken as proven, as Django takes it for the rest of a request once checked. A
connection that died inside that second fails the task's first statement instead: the task ends with
the error, nothing is written, the connection is replaced when the task ends (Django checks a
connection that raised), and the sweeper sends the run again.
"""
from __future__ import annotations

import time

from django.db.backends.base.base import BaseDatabaseWrapper

PROVEN_SECONDS = 1.0


def note_proven(db: BaseDatabaseWrapper) -> None:
    """A statement came back on this connection just now."""
    db._durable_proven = (db.connection, time.monotonic())  # type: ignore[attr-defined]  # durable's state kept on Django's connection


def check_unless_proven(db: BaseDatabaseWrapper) -> None:
    """Django's health check, once per task as Django makes it, unless the connection was proven moments ago."""
    if db.health_check_done or not db.health_check_enabled:  # type: ignore[attr-defined]  # Django 4.1's; not in the stubs
        return
    proven = getattr(db, "_durable_proven", None)
    if proven is not None and proven[0] is db.connection and time.monotonic() - proven[1] < PROVEN_SECONDS:
        db.health_check_done = True  # type: ignore[attr-defined]  # as above
        return
    db.close_if_health_check_failed()
