"""The executor's writes to the database, each fenced by the lease's token (invariant 9, docs/invariants.md).

`store()` picks the backend: the portable ORM store, or the Postgres store whose step
commit is a single statement (one round trip, one commit).
"""
from __future__ import annotations

from django.db import connection

from durable.store.base import Lease, ResumePoint, RunStore


def store() -> RunStore:
    if connection.vendor == "postgresql":
        from durable.store.postgres import PostgresRunStore

        return PostgresRunStore()
    return RunStore()


__all__ = ["Lease", "ResumePoint", "RunStore", "store"]
