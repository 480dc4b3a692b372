"""The test's clock: moving it makes what falls due in that time due now (timers, event deadlines, retries,
approvals' expiry, a dead worker's lease), without sleeping.

durable decides what is due by the database's clock (invariant 17), which a test cannot move. The kit moves the
due times instead: every due time still ahead is brought nearer by the time moved, so a three-day sleep is due
after `clock.move(days=3)` and not after `clock.move(days=2)`. What happened keeps its time: journal entries,
checkpoints and the timeline say when they were written.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from durable.models import Run
from durable.store import store


class Clock:
    """The clock of one test: `now()` is the database's clock plus what the test moved it by."""

    def __init__(self) -> None:
        self.moved = timedelta(0)

    def now(self) -> datetime:
        return store().db_now() + self.moved

    def move(self, delta: timedelta | None = None, **parts: float) -> datetime:
        """Move the clock forward by `delta` (or `days=`, `hours=`, `minutes=`, `seconds=`); its new time."""
        step = (delta or timedelta(0)) + timedelta(**parts)
        if step < timedelta(0):
            raise ValueError(f"the clock only moves forward, not by {step}")
        with transaction.atomic():
            _bring_nearer(step)
        self.moved += step
        return self.now()


def _bring_nearer(step: timedelta) -> None:
    Run.objects.filter(next_attempt_at__isnull=False).update(next_attempt_at=F("next_attempt_at") - step)
    Run.objects.filter(lease_expires_at__isnull=False).update(lease_expires_at=F("lease_expires_at") - step)
    # A woken wait keeps its due time from what the run waited for (durable.runtime.waits._current).
    for run_id, waiting in Run.objects.filter(waiting_for__isnull=False).values_list("id", "waiting_for"):
        if isinstance(waiting, dict) and waiting.get("until"):
            Run.objects.filter(id=run_id).update(waiting_for=_earlier(waiting, step))
    _bring_approvals_nearer(step)


def _earlier(waiting: dict[str, Any], step: timedelta) -> dict[str, Any]:
    return {**waiting, "until": (datetime.fromisoformat(waiting["until"]) - step).isoformat()}


def _bring_approvals_nearer(step: timedelta) -> None:
    from approvals.models import ApprovalRequest
    from durable.engine.approvals import ApprovalStatus

    ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).update(
        expires_at=F("expires_at") - step)
