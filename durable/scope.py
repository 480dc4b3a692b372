"""Which runs this process's sweeper may touch: production's runs, or only the runs one tool created (invariant 14).

A drill, benchmark or scale-out harness pointed at a shared database starts its runs as an
account of its own (one per invocation, named with TOOL_ACCOUNT_PREFIX: durable.tools.workload.tool_account)
and its workers with `DURABLE_SCOPE_CREATED_BY` set to that account's id. Their sweeper then
re-sends, reconciles, expires and notifies only those runs' work; their queue is private too, so a
message for any other run never reaches them and they claim nothing else. Production leaves the
setting unset, and its sweeper in turn leaves every tool's runs to that tool's own workers: a
drill's crashed run is never resumed by a production worker against production's downstreams.
"""
from __future__ import annotations

from django.db.models import Q

from durable.conf import durable_settings

TOOL_ACCOUNT_PREFIX = "durable-tool-"


def scoped_to() -> int | None:
    """The id of the tool account whose runs alone this process may touch, or None (production)."""
    return durable_settings.DURABLE_SCOPE_CREATED_BY


def runs_in_scope(path: str = "") -> Q:
    """A filter on runs (or, with `path` such as "run__", on rows that belong to a run) keeping those in scope."""
    owner = scoped_to()
    if owner is None:
        return ~Q(**{f"{path}created_by__username__startswith": TOOL_ACCOUNT_PREFIX})
    return Q(**{f"{path}created_by_id": owner})
