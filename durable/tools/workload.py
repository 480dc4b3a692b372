"""Synthetic workloads (the benchmark, the drill): waiting for their runs, and removing them after."""
from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from uuid import UUID

from django.db import transaction

from durable.models import Run, SideEffect


def wait_for_runs(run_ids: Sequence[UUID], *, until: Collection[str], timeout: float,
                  tick: Callable[[], None] | None = None) -> int:
    """Poll until every run's status is in `until`, or the timeout; returns how many are not."""
    deadline = time.monotonic() + timeout
    waiting = Run.objects.filter(id__in=run_ids).exclude(status__in=list(until))
    while waiting.exists() and time.monotonic() < deadline:
        if tick is not None:
            tick()
        time.sleep(0.2)
    return waiting.count()


def delete_runs(run_ids: Sequence[UUID]) -> None:
    """Delete runs with their ledger rows; checkpoints and journal entries cascade."""
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start:start + 500]
        with transaction.atomic():
            SideEffect.objects.filter(run_id__in=chunk).delete()  # PROTECTs its run: goes first
            Run.objects.filter(id__in=chunk).delete()
