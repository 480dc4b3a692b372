"""Waits on a real worker and broker: how soon a parked run runs again once its event is sent or its timer is due.

- `durable_bench --events N` parks N runs on `ctx.wait_for_event`, then sends each its event through
  `durable.send_event`, one after another with the worker idle, and times the send -> the step running on past
  its wait.
- `durable_bench --timers N` starts N runs, a few a second, each sleeping a random duration (`ctx.sleep`), and
  times each timer's due time (the database's, recorded with the wait) -> the step running on past it: woken by
  the timer the sweeping worker armed ahead of it (durable.runtime.wakes.arm_timers), or by the sweep itself.

Each step notes the wall clock as it runs on (same machine, same clock), as the wake-up probes do
(durable/tools/bench/wakeup.py). Workers started by durable_bench import this module, which registers the
workflows.
"""
from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from durable.context import Context
from durable.tools.bench.wakeup import latency_lines, wait_for_state
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

EVENT_WORKFLOW, TIMER_WORKFLOW = "bench-wait-event", "bench-wait-timer"
EVENT = "go"
SENDER = "durable_bench"


class Parked(BaseModel):
    seconds: float = 0.0  # the timer's length (timer runs)
    resumed_at: float = 0.0  # the wall clock as the step ran on past its wait


def listen(ctx: Context, state: Parked) -> Parked:
    ctx.wait_for_event(EVENT)
    state.resumed_at = time.time()
    return state


def nap(ctx: Context, state: Parked) -> Parked:
    ctx.sleep(timedelta(seconds=state.seconds))
    state.resumed_at = time.time()
    return state


def waits_workflow(name: str) -> Workflow:
    def build() -> Workflow:
        # No tools, prompts or model: the releases say so (durable.W010).
        workflow = Workflow(name=name, version=1, state=Parked, input=Parked, tool_catalog_version="none",
                            prompt_release="none", model_policy_version="none")
        workflow.step(listen if name == EVENT_WORKFLOW else nap, name="wait")
        return workflow

    return registered_once(name, build)


@dataclass(frozen=True)
class WaitsReport:
    """What one mode measured: a title, latency rows (milliseconds) and how many of its runs ended."""

    title: list[str]
    rows: list[tuple[str, list[float]]]
    runs: int
    succeeded: int

    def lines(self) -> list[str]:
        return [*self.title, *latency_lines(self.rows, counted="runs", worst=True),
                f"  every run ended: {self.succeeded} of {self.runs} SUCCEEDED"]


@contextmanager
def worker(account: Any, log_dir: Path, workflows: str = __name__, name: str = "bench-waits") -> Iterator[None]:
    """One worker process with the default settings (its sweeper included), scoped to `account`'s runs, with the
    benchmark's workflows (the module `workflows`) loaded."""
    from durable.conf import durable_settings
    from durable.tools.processes import WorkerProcess
    from durable.tools.workload import scope_env

    env = {**scope_env(account),
           "DURABLE_WORKFLOW_MODULES": ",".join([*durable_settings.DURABLE_WORKFLOW_MODULES, workflows])}
    process = WorkerProcess(env=env, name=name, log_path=log_dir / f"{name}-worker.log")
    process.start()
    try:
        yield
    finally:
        process.stop()


def events(count: int, account: Any, timeout: float) -> WaitsReport:
    """Park `count` runs on an event, then send each its event and wait for it to end, one run at a time."""
    from durable.engine.states import RunStatus
    from durable.events import send_event
    from durable.models import RunEvent

    run_ids = _park(EVENT_WORKFLOW, [Parked() for _ in range(count)], account, timeout)
    sent_at: dict[UUID, float] = {}
    returned_ms: list[float] = []
    woken_ms: list[float] = []
    for run_id in run_ids:
        sent = sent_at[run_id] = time.time()
        delivery = send_event(name=EVENT, payload={"n": len(returned_ms)}, run_id=run_id, sender=SENDER)
        returned_ms.append((time.time() - sent) * 1000)
        if not delivery.woke:
            raise RuntimeError(f"the event did not wake run {run_id}: was it parked?")
        state = wait_for_state(run_id, RunStatus.SUCCEEDED, timeout, Parked)
        woken_ms.append((state.resumed_at - sent) * 1000)
    # When the worker's wait took the event from the mailbox: the message, the claim and the visit re-executed.
    consumed = RunEvent.objects.filter(run_id__in=run_ids, consumed_at__isnull=False).values_list("run_id", "consumed_at")
    taken_ms = [(taken.timestamp() - sent_at[run_id]) * 1000 for run_id, taken in consumed if taken is not None]
    title = [f"event sent -> the waiting step running again: {count} runs parked on ctx.wait_for_event, each sent "
             f"its event by durable.send_event, one after another, 1 idle worker"]
    rows = [("durable.send_event() returned (committed, message sent)", returned_ms),
            ("event sent -> the worker's wait takes it from the mailbox", taken_ms),
            ("event sent -> step running on", woken_ms)]
    return WaitsReport(title, rows, count, _succeeded(run_ids))


def timers(count: int, account: Any, timeout: float, shortest: float, longest: float,
           per_second: float) -> WaitsReport:
    """Start `count` runs, `per_second` a second, each sleeping between `shortest` and `longest` seconds (at
    random); wait for them all to end, then read each one's due time and when its step ran on."""
    from durable.conf import durable_settings
    from durable.engine.states import RunStatus
    from durable.tools.workload import wait_for_runs

    chosen = random.Random(count)  # the same durations for the same count: rounds compare
    naps = [Parked(seconds=round(chosen.uniform(shortest, longest), 3)) for _ in range(count)]
    run_ids = _start(TIMER_WORKFLOW, naps, account, per_second)
    unfinished = wait_for_runs(run_ids, until={RunStatus.SUCCEEDED, RunStatus.FAILED}, timeout=timeout + longest)
    if unfinished:
        raise RuntimeError(f"{unfinished} timer run(s) unfinished after {timeout + longest:.0f}s")
    sweep = durable_settings.DURABLE_SWEEP_SECONDS
    late = _timer_latencies(run_ids)
    rows = [("timer due -> woken (PENDING, message sent)", [woken for _, woken, _ in late]),
            ("timer due -> step running on", [ms for _, _, ms in late]),
            (f"  sleeping less than a sweep interval ({sweep:g} s)", [ms for s, _, ms in late if s < sweep]),
            ("  sleeping a sweep interval or more", [ms for s, _, ms in late if s >= sweep])]
    title = [f"timer due -> the sleeping step running again: {count} runs started {per_second:g} a second, each "
             f"sleeping {shortest:g} to {longest:g} s at random (ctx.sleep), 1 worker sweeping every {sweep:g} s"]
    return WaitsReport(title, rows, count, _succeeded(run_ids))


def _timer_latencies(run_ids: list[UUID]) -> list[tuple[float, float, float]]:
    """Per run: the sleep's length in seconds, and the milliseconds from its due time to its wake (the armed timer's
    or the sweep's UPDATE, which notes when it sent the run) and to the step running on (its last state)."""
    from durable.models import JournalEntry, Run

    due = {run_id: datetime.fromisoformat((detail or {})["until"]).timestamp() for run_id, detail in
           JournalEntry.objects.filter(run_id__in=run_ids, kind=JournalEntry.Kind.WAIT).values_list("run_id", "detail")}
    sent = {run_id: woken.timestamp() for run_id, woken in Run.objects.filter(id__in=run_ids).values_list(
        "id", "enqueued_at") if woken is not None}
    from durable.store.checkpoints import state_at

    newest = {run_id: Parked.model_validate(state_at(run_id, seq)) for run_id, seq in
              Run.objects.filter(id__in=run_ids).values_list("id", "checkpoint_seq")}
    return [(newest[run_id].seconds, (sent[run_id] - due[run_id]) * 1000,
             (newest[run_id].resumed_at - due[run_id]) * 1000) for run_id in run_ids]


def _park(workflow: str, inputs: list[Parked], account: Any, timeout: float) -> list[UUID]:
    """Start the runs and wait until every one is parked."""
    from durable.engine.states import RunStatus
    from durable.tools.workload import wait_for_runs

    run_ids = _start(workflow, inputs, account, per_second=0.0)
    if wait_for_runs(run_ids, until={RunStatus.WAITING}, timeout=timeout):
        raise RuntimeError(f"{workflow}: runs not parked after {timeout:.0f}s")
    return run_ids


def _start(workflow: str, inputs: list[Parked], account: Any, per_second: float) -> list[UUID]:
    """Start a run per input, sent to the workers at once; `per_second` paces the starts (0: as fast as they go)."""
    from durable import services

    waits_workflow(workflow)
    run_ids: list[UUID] = []
    began = time.monotonic()
    for i, state in enumerate(inputs):
        if per_second:
            time.sleep(max(0.0, began + i / per_second - time.monotonic()))
        run, _ = services.start_run(workflow=workflow, input=state.model_dump(), business_key=f"{workflow}-{account.pk}-{i}",
                                    user=account)
        run_ids.append(run.id)
    return run_ids


def _succeeded(run_ids: list[UUID]) -> int:
    from durable.engine.states import RunStatus
    from durable.models import Run

    return Run.objects.filter(id__in=run_ids, status=RunStatus.SUCCEEDED).count()


waits_workflow(EVENT_WORKFLOW)
waits_workflow(TIMER_WORKFLOW)
