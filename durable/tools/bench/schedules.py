"""`durable_bench --schedules N`: how late a schedule's run starts after its fire time, with one worker.

N schedules of a one-step workflow, each with one fire time in the next seconds (their next fire times moved there,
`--schedules-per-second` apart, as a tool may move them), fired by a worker scoped to the tool's account: its
sweeper and the timers it arms. The lateness is the run's creation time less its fire time (both on this machine).
"""
from __future__ import annotations

import time
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable.tools.bench import waits
from durable.tools.bench.wakeup import latency_lines
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

WORKFLOW = "bench-scheduled"
LEAD_SECONDS = 3.0  # the first fire time this far ahead: the worker has swept and armed its timers by then


class Nothing(BaseModel):
    pass


def scheduled_workflow() -> Workflow:
    def build() -> Workflow:
        workflow = Workflow(name=WORKFLOW, version=1, state=Nothing, input=Nothing, tool_catalog_version="none",
                            prompt_release="none", model_policy_version="none")
        workflow.step(lambda ctx, state: state, name="only")
        return workflow

    return registered_once(WORKFLOW, build)


def worker(account: Any, log_dir: Path) -> AbstractContextManager[None]:
    """One worker process with the default settings (its sweeper included), scoped to `account`'s schedules."""
    return waits.worker(account, log_dir, workflows=__name__, name="bench-schedules")


def fire(count: int, account: Any, timeout: float, per_second: float) -> list[str]:
    """Make `count` schedules due one after another, `per_second` a second, and wait for each to start its run."""
    from durable import schedules
    from durable.models import Schedule
    from durable.store import store

    prefix = f"bench-{account.pk}-"
    made = [schedules.create(user=account, name=f"{prefix}{n}", workflow=WORKFLOW, cron="0 0 1 1 *", paused=True)
            for n in range(count)]
    first = store().db_now() + timedelta(seconds=LEAD_SECONDS)
    for n, schedule in enumerate(made):
        Schedule.objects.filter(id=schedule.id).update(paused=False,
                                                       next_fire_at=first + timedelta(seconds=n / per_second))
    deadline = time.monotonic() + LEAD_SECONDS + count / per_second + timeout
    waiting = Schedule.objects.filter(name__startswith=prefix, last_run__isnull=True)
    while waiting.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    late_ms = [(run_created - fired).total_seconds() * 1000 for fired, run_created in Schedule.objects.filter(
        name__startswith=prefix, last_run__isnull=False).values_list("last_fire_at", "last_run__created_at")
        if fired is not None]
    return [f"durable_bench --schedules {count}: one fire time each, {per_second:g} a second, one worker "
            "(its sweeper and armed timers); lateness = the run's creation less its fire time",
            *latency_lines([("a schedule's run started after its fire time", late_ms)], counted="runs", worst=True),
            f"  fire times that started their run: {len(late_ms)} of {count}"]


def forget(account: Any) -> None:
    """Delete the benchmark's schedules (their runs go with the tool's other runs)."""
    from durable.models import Schedule

    Schedule.objects.filter(name__startswith=f"bench-{account.pk}-").delete()


scheduled_workflow()
