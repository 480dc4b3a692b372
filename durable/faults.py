"""Fault points for drills: crash the worker process at a phase boundary, as a real crash would.

Armed by `DURABLE_FAULT_POINTS` (comma-separated point names) and optionally narrowed by
`DURABLE_FAULT_ACTIONS`. Each armed point fires once per operation: a marker file in
`DURABLE_FAULT_DIR` remembers it, so the rescued run can pass the same point afterwards.
"""
from __future__ import annotations

import os
from pathlib import Path

AFTER_PREPARE = "after_prepare"
AFTER_STARTED = "after_started"
AFTER_DOWNSTREAM = "after_downstream"  # answered, not yet committed: the classic window
AFTER_COMMIT = "after_commit"  # committed, step not yet checkpointed
FAULT_POINTS = (AFTER_PREPARE, AFTER_STARTED, AFTER_DOWNSTREAM, AFTER_COMMIT)


def _armed() -> set[str]:
    return {p.strip() for p in os.environ.get("DURABLE_FAULT_POINTS", "").split(",") if p.strip()}


def fault_point(point: str, *, operation_id: str, action: str) -> None:
    """Exit the process at once (no cleanup, no ack) if this point is armed for this action."""
    if point not in _armed():
        return
    actions = {a.strip() for a in os.environ.get("DURABLE_FAULT_ACTIONS", "").split(",") if a.strip()}
    if actions and action not in actions:
        return
    marker = Path(os.environ.get("DURABLE_FAULT_DIR", "/tmp/durable-faults")) / f"{operation_id}.{point}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return  # fired for this operation already
    os._exit(137)
