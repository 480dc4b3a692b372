"""Parallel calls in one step: N activities of M ms each through ctx.parallel, timed in-process.

Each run of `bench-parallel-N` has one step that makes N activities at once, each sleeping M ms
(a model or a tool taking that long); the runs are advanced one after another in this process.
What is timed: the ctx.parallel call inside the step (the group: every call made and recorded),
and the whole run (claim, the step, its write). Made one after another, the calls would take N x M ms.
"""
from __future__ import annotations

import statistics
import time
from typing import Any

from pydantic import BaseModel

from durable import services
from durable.context import Context
from durable.runtime import executor
from durable.tools.bench.workflows import registered_once
from durable.tools.workload import delete_runs
from durable.workflow import Workflow

_GROUP_MS: list[float] = []  # each run's ctx.parallel, as the step timed it


class Sleeps(BaseModel):
    calls: int = 8
    call_ms: float = 50.0
    results: list[Any] = []


def _call(ms: float, i: int) -> int:
    time.sleep(ms / 1000)
    return i


def _gather(ctx: Context, state: Sleeps) -> Sleeps:
    started = time.perf_counter()
    state.results = ctx.parallel(*(ctx.call(f"tool{i}", _call, state.call_ms, i) for i in range(state.calls)))
    _GROUP_MS.append((time.perf_counter() - started) * 1000)
    return state


def parallel_workflow(calls: int) -> Workflow:
    def build() -> Workflow:
        workflow = Workflow(name=f"bench-parallel-{calls}", version=1, state=Sleeps, input=Sleeps)
        workflow.step(_gather, name="gather")
        return workflow

    return registered_once(f"bench-parallel-{calls}", build)


def time_parallel(calls: int, call_ms: float, runs: int) -> list[str]:
    """Advance `runs` runs of one parallel step in this process; the group's and the run's medians."""
    workflow = parallel_workflow(calls)
    _GROUP_MS.clear()
    run_ids, whole_ms = [], []
    try:
        for i in range(runs + 1):  # the first warms up (connections, prepared statements, the pool's threads)
            run, _ = services.start_run(workflow=workflow.name, input={"calls": calls, "call_ms": call_ms},
                                        business_key=f"bench-parallel-{i}", enqueue=False)
            run_ids.append(run.id)
            started = time.perf_counter()
            executor.advance(run.id)
            whole_ms.append((time.perf_counter() - started) * 1000)
    finally:
        delete_runs(run_ids)
    group, whole = _GROUP_MS[1:], whole_ms[1:]
    return [
        f"durable_bench --parallel {calls}: {runs} runs of one step making {calls} activities of {call_ms:g} ms "
        f"at once (DURABLE_PARALLEL_CALLS permitting), advanced in this process",
        f"  ctx.parallel (every call made and recorded): median {statistics.median(group):.1f} ms, "
        f"max {max(group):.1f} ms; one after another they would take {calls * call_ms:g} ms",
        f"  a whole run (claim, the step, its checkpoint): median {statistics.median(whole):.1f} ms",
        f"  activity time above one call's {call_ms:g} ms: median {statistics.median(group) - call_ms:.1f} ms",
    ]
