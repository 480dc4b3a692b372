"""Fault injection for drills: crash the worker process at a phase boundary, as a real crash would.

The tools app adds `crash_if_armed` as a hook of the runtime's fault points (durable.runtime.fault_points).

Armed by `DURABLE_FAULT_POINTS` (comma-separated point names) and optionally narrowed by
`DURABLE_FAULT_ACTIONS`. Each armed point fires once per operation: a marker file in
`DURABLE_FAULT_DIR` remembers it, so the rescued run can pass the same point afterwards.
`DURABLE_FAULT_RATE` (0..1) makes an armed point fire only for that fraction of operations,
chosen by hashing `DURABLE_FAULT_SEED`, the operation and the point: crashes at random places,
and the same places again with the same seed.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from durable.runtime.fault_points import (  # noqa: F401  the points, named here for the drill and its tests
    AFTER_COMMIT,
    AFTER_DOWNSTREAM,
    AFTER_PREPARE,
    AFTER_STARTED,
    FAULT_POINTS,
)


def armed() -> set[str]:
    """The fault points armed in this process (DURABLE_FAULT_POINTS)."""
    return {p.strip() for p in os.environ.get("DURABLE_FAULT_POINTS", "").split(",") if p.strip()}


def crash_if_armed(point: str, *, operation_id: str, action: str) -> None:
    """Exit the process at once (no cleanup, no ack) if this point is armed for this action."""
    if point not in armed():
        return
    actions = {a.strip() for a in os.environ.get("DURABLE_FAULT_ACTIONS", "").split(",") if a.strip()}
    if actions and action not in actions:
        return
    if not chosen(operation_id, point, rate=float(os.environ.get("DURABLE_FAULT_RATE", "1")),
                  seed=os.environ.get("DURABLE_FAULT_SEED", "")):
        return
    marker = Path(os.environ.get("DURABLE_FAULT_DIR", "/tmp/durable-faults")) / f"{operation_id}.{point}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        return  # fired for this operation already
    os._exit(137)


def chosen(operation_id: str, point: str, *, rate: float, seed: str) -> bool:
    """Whether a point fires for an operation at this rate: a stable draw, the same in every process."""
    if rate >= 1:
        return True
    digest = hashlib.sha256(f"{seed}:{operation_id}:{point}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate
