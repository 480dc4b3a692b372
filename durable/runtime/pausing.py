"""A pause as the worker sees it: the run it holds stops at a step boundary once a pause was asked for.

An operator's pause moves a run no worker holds to PAUSED at once (durable/pauses.py); a RUNNING run is only asked
(`Run.pause_requested_at`), and the worker holding it moves it (durable/runtime/transitions.py's `paused_by_worker`,
fenced on its lease) at the first step boundary where it looks: the call in flight finishes and is recorded, the
step's checkpoint is written, and no step starts after it. Looking costs a query, so a worker looks when it matters:

- when it claims the run (free: the claim read the row);
- after a step that made a call (a model, a tool, a downstream: one query after a slow call costs little);
- before a step that declares side effects (a business action is never performed once the pause was seen);
- else at most every DURABLE_PAUSE_LOOK_SECONDS, so a run of steps that only compute pays nothing per step.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from uuid import UUID

from durable.conf import durable_settings
from durable.models import Run
from durable.runtime import transitions
from durable.store import Lease

log = logging.getLogger("durable.pausing")

_calls_made = 0  # outward calls this process made (heartbeat.lease_kept counts them): "did the step call anything?"


def call_made() -> None:
    """An outward call is about to leave (under a kept lease): the worker looks at the next boundary."""
    global _calls_made
    _calls_made += 1  # shared by every run of the process: a count another run bumped only makes a look early


@dataclass
class Looks:
    """When the worker holding one run last looked whether a pause was asked for."""

    run_id: UUID
    at: float = field(default_factory=time.monotonic)
    calls_seen: int = field(default_factory=lambda: _calls_made)

    def due(self, *, before_side_effects: bool) -> bool:
        """Whether to look at this boundary."""
        return (before_side_effects or _calls_made != self.calls_seen
                or time.monotonic() - self.at >= durable_settings.DURABLE_PAUSE_LOOK_SECONDS)

    def asked(self) -> bool:
        """Look: whether a pause was asked for the run."""
        self.at, self.calls_seen = time.monotonic(), _calls_made
        return Run.objects.filter(id=self.run_id, pause_requested_at__isnull=False).exists()


def pause_now(lease: Lease) -> bool:
    """The worker stops holding the run: PAUSED. False when its lease was lost meanwhile (nothing is written)."""
    paused = transitions.paused_by_worker(lease.run_id, token=lease.token)
    if paused:
        log.info("run paused at a step boundary, as asked")
    return paused
