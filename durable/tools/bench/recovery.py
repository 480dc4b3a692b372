"""Recovery after SIGKILL with the default settings: how long a killed worker's run waits before another worker
takes it over (`durable_bench --kill N`).

Two real worker processes, started as the docs start them (no beat, no sweeper process, no timing
setting changed), consume the benchmark's queue. Each round starts one run of `bench-recovery`
(STEPS steps of STEP_SECONDS of work each), waits until a worker holds it, lets it run for a random
part of its steps, SIGKILLs the worker holding it, and times SIGKILL -> another worker's claim (the
run's fencing token moving on, polled every 20 ms). The killed worker is replaced while the run
finishes on the other, and the round checks that every step was checkpointed once.
Workers started by durable_bench import this module, which registers the workflow.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from durable.context import Context
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

WORKFLOW = "bench-recovery"
STEPS = 10
STEP_SECONDS = 0.5  # work each step does (a sleep): the run lasts about five seconds
POLL_SECONDS = 0.02
GIVE_UP_SECONDS = 180.0


class Work(BaseModel):
    done: int = 0


def work(ctx: Context, state: Work) -> Work:
    time.sleep(STEP_SECONDS)
    state.done += 1
    return state


def recovery_workflow() -> Workflow:
    def build() -> Workflow:
        # No tools, prompts or model: the releases say so (durable.W010).
        workflow = Workflow(name=WORKFLOW, version=1, state=Work, input=Work, tool_catalog_version="none",
                            prompt_release="none", model_policy_version="none")
        for i in range(STEPS):
            workflow.step(work, name=f"work{i + 1}")
        return workflow

    return registered_once(WORKFLOW, build)


@dataclass
class Recoveries:
    """Seconds from each SIGKILL to another worker's claim of the killed worker's run."""

    seconds: list[float] = field(default_factory=list)

    def lines(self, lease: float, sweep: float) -> list[str]:
        ordered = sorted(self.seconds)
        p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]  # nearest rank: the largest below 100 kills
        return [f"recovery after SIGKILL, default settings (DURABLE_LEASE_SECONDS {lease:g}, "
                f"DURABLE_SWEEP_SECONDS {sweep:g}), 2 workers, no beat: {len(ordered)} kill{'s' if len(ordered) != 1 else ''}",
                f"  SIGKILL -> resumed  p50 {statistics.median(ordered):.1f} s, p99 {p99:.1f} s, "
                f"min {ordered[0]:.1f} s, max {ordered[-1]:.1f} s",
                "  every run finished, each step checkpointed once"]


def measure(kills: int, env: dict[str, str], account: Any, log_dir: Path) -> Recoveries:
    """Kill the worker holding a run `kills` times; the runs are left for the caller to delete."""
    from durable.tools.processes import WorkerProcess

    found = Recoveries()
    started = 0

    def worker(slot: int) -> WorkerProcess:
        nonlocal started
        started += 1
        return WorkerProcess(env=env, name=f"recovery{slot}-{started}", log_path=log_dir / f"recovery-worker-{slot}.log")

    pool = [worker(slot).start() for slot in range(2)]
    try:
        for round_ in range(kills * 2):
            if len(found.seconds) == kills:
                break
            run_id = _start(round_, account)
            holder, token = _wait_claimed(run_id)
            time.sleep(random.uniform(STEP_SECONDS, STEPS * STEP_SECONDS * 0.8))  # somewhere within its steps
            slot = next(i for i, w in enumerate(pool) if holder.endswith(f":{w.pid}"))
            if _holder(run_id) != (holder, token):  # a slow machine: the run ended first; not a kill mid-run
                _check_finished(run_id)
                continue
            pool[slot].kill()
            killed = time.monotonic()
            _wait(lambda run_id=run_id, token=token: _token(run_id) > token, f"run {run_id} to be taken over after its worker was killed")
            found.seconds.append(time.monotonic() - killed)
            pool[slot].stop()
            pool[slot] = worker(slot).start()
            _check_finished(run_id)
    finally:
        for w in pool:
            w.stop()
    return found


def _start(round_: int, account: Any) -> UUID:
    from durable import services

    run, _ = services.start_run(workflow=WORKFLOW, input={}, business_key=f"bench-recovery-{round_}", user=account)
    return run.id


def _wait_claimed(run_id: UUID) -> tuple[str, int]:
    from durable.models import Run

    _wait(lambda: Run.objects.filter(id=run_id, checkpoint_seq__gte=1).exclude(lease_owner=None).exists(),
          f"run {run_id} to be claimed")
    owner, token = Run.objects.values_list("lease_owner", "fencing_token").get(id=run_id)
    assert owner is not None  # the wait above saw it claimed; the owner stays set while the lease is held
    return owner, token


def _holder(run_id: UUID) -> tuple[str | None, int]:
    from durable.models import Run

    owner, token = Run.objects.values_list("lease_owner", "fencing_token").get(id=run_id)
    assert owner is not None  # the wait above saw it claimed; the owner stays set while the lease is held
    return owner, token


def _token(run_id: UUID) -> int:
    from durable.models import Run

    return Run.objects.values_list("fencing_token", flat=True).get(id=run_id)


def _check_finished(run_id: UUID) -> None:
    from durable.engine.states import RunStatus
    from durable.models import Checkpoint, Run

    _wait(lambda: Run.objects.filter(id=run_id, status=RunStatus.SUCCEEDED).exists(), f"run {run_id} to finish")
    steps = list(Checkpoint.objects.filter(run_id=run_id).exclude(seq=0).values_list("step", flat=True))
    if sorted(steps) != sorted(f"work{i + 1}" for i in range(STEPS)):
        raise RuntimeError(f"run {run_id} checkpointed {steps}: a step twice or missing")


def _wait(done: Any, what: str) -> None:
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting {GIVE_UP_SECONDS:.0f}s for {what}")
        time.sleep(POLL_SECONDS)


recovery_workflow()
