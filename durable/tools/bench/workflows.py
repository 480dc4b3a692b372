"""The benchmark's workflows: S trivial steps (or one step visited S times, `--loop`), optionally then one
side effect. Workers started by durable_bench import this."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable.context import Context
from durable.engine.graph import Route
from durable.registry import registry
from durable.tools.bench.downstream import ACTION, downstream
from durable.workflow import Workflow


class Counter(BaseModel):
    n: int = 0


def bump(ctx: Context, state: Counter) -> Counter:
    state.n += 1
    return state


def charge(ctx: Context, state: Counter) -> Counter:
    ctx.side_effect(ACTION, business_key=ctx.business_key, downstream=downstream, payload={"amount": state.n})
    state.n += 1
    return state


def visit(steps: int, then: str | None) -> Callable[[Any, Counter], Route]:
    """The loop's one step: add one, and route back to itself until it has been visited `steps` times."""

    def step(ctx: Context, state: Counter) -> Route:
        state.n += 1
        return Route("step" if state.n < steps else then, state)

    return step


def bench_workflow(steps: int, side_effect: bool = False, loop: bool = False) -> Workflow:
    """`bench-S`: S steps that each add one; `bench-loop-S`: one step that adds one and routes back to
    itself, visited S times; `-charge`: then a step with one side effect.

    Registered once per process.
    """
    name = f"bench-{'loop-' if loop else ''}{steps}{'-charge' if side_effect else ''}"

    def build() -> Workflow:
        workflow = Workflow(name=name, version=1, state=Counter, input=Counter)
        if loop:
            then = "charge" if side_effect else None
            workflow.step(visit(steps, then), name="step", next=["step", *([then] if then else [])])
        else:
            for i in range(steps):
                workflow.step(bump, name=f"step{i + 1}")
        if side_effect:
            workflow.step(charge, name="charge", side_effects=[ACTION])
        return workflow

    return registered_once(name, build)


def registered_once(name: str, build: Callable[[], Workflow]) -> Workflow:
    """The benchmark workflow `name` v1, built and registered by the first caller in this process."""
    try:
        return registry.get(name, 1)
    except LookupError:
        return registry.register(build())


def visits_per_run(steps: int, side_effect: bool = False) -> int:
    """How many step visits (checkpoints) a run of a benchmark workflow makes, looping or not."""
    return steps + (1 if side_effect else 0)


def _report_worker_stats(stats_dir: str) -> None:
    """Count this worker's commits, tasks and CPU seconds (its own and its Postgres backends').

    A task only bumps the counts; a thread of the worker's own rewrites its stats file at most every
    50 ms while they change (durable_bench reads it 0.3 s after the last run ends). Sampling /proc and
    rewriting the file after every task cost the worker about 0.4 ms a task, a cost the benchmark
    added to what it measured and that no production worker pays."""
    import threading
    import time

    from celery.signals import task_postrun, task_prerun
    from django.db import connection

    from durable.store import batched
    from durable.tools.bench.commits import CommitCounter
    from durable.tools.bench.cpu import CpuMeter

    counter = CommitCounter()
    counter.install()
    meter = CpuMeter()
    tasks = {"advance": 0, "seen": -1}
    path = Path(stats_dir) / f"{os.getpid()}.json"

    @task_prerun.connect(weak=False)
    def _start(**_: Any) -> None:
        first = meter.worker_start is None
        if first:
            connection.ensure_connection()  # so the backend is counted from the first task on
        meter.start()  # notes a new backend behind the task's connection (this thread's) when there is one
        if first:
            threading.Thread(target=_write_while_counting, name="durable-bench-stats", daemon=True).start()

    @task_postrun.connect(weak=False)
    def _count(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", "") == "durable.advance_run":
            tasks["advance"] += 1

    def _write_while_counting() -> None:
        while True:
            time.sleep(0.05)
            commits = counter.commits + batched.statements_sent()  # the writer's batches, one commit each
            count = tasks["advance"] + commits
            if count != tasks["seen"]:
                tasks["seen"] = count
                meter.sample()  # this thread has no connection of its own: it reads the backends start() saw
                path.write_text(json.dumps({"commits": commits, "advance_tasks": tasks["advance"],
                                            **meter.as_json()}))


if os.environ.get("DURABLE_BENCH_STEPS"):
    bench_workflow(int(os.environ["DURABLE_BENCH_STEPS"]), side_effect=bool(os.environ.get("DURABLE_BENCH_SIDE_EFFECT")),
                   loop=bool(os.environ.get("DURABLE_BENCH_LOOP")))
if os.environ.get("DURABLE_BENCH_STATS_DIR"):
    _report_worker_stats(os.environ["DURABLE_BENCH_STATS_DIR"])
