"""Waiting on real processes: poll the database until a run gets where a test needs it."""
from __future__ import annotations

import time
from collections.abc import Callable

from durable.models import Run


def wait_for(predicate: Callable[[], object], timeout: float = 45.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def status_of(run_id) -> str:
    return Run.objects.values_list("status", flat=True).get(id=run_id)
