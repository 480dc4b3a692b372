"""DBOS Transact on the workload: each step a @DBOS.step, its system tables in a schema of their own."""
from __future__ import annotations

import time
import uuid

from durable.tools.bench.compare import DBOS, SystemResult, from_intervals
from durable.tools.bench.peers import StepClock, Workload, main, reset_schema

SCHEMA = "durable_bench_dbos"


def run_dbos(workload: Workload) -> SystemResult:
    """R workflows run one after another in this process, as one durable worker runs its runs."""
    from dbos import DBOS as Dbos
    from dbos import SetWorkflowID

    from durable.tools.bench.downstream import downstream

    clock = StepClock()

    @Dbos.step()
    def bump(n: int) -> int:
        return n + 1

    @Dbos.step()
    def charge(n: int) -> dict:
        workflow_id = Dbos.workflow_id or ""
        # The idempotency key is the workflow's id and the step: the same on a recovered workflow.
        return downstream.execute(f"{workflow_id}:charge", workflow_id, {"amount": n}).result

    @Dbos.workflow()
    def bench(steps: int, side_effect: bool) -> int:
        clock.start_workflow()
        n = 0
        for _ in range(steps):
            n = bump(n)
            clock.tick()
        if side_effect:
            charge(n)
            clock.tick()
        return n

    reset_schema(workload.database_url, SCHEMA, create=False)
    Dbos(config={
        "name": "durable-bench",
        # SQLAlchemy names the dialect postgresql://; libpq accepts postgres:// too.
        "system_database_url": workload.database_url.replace("postgres://", "postgresql://", 1),
        "dbos_system_schema": SCHEMA,
        "log_level": "WARNING",
    })
    Dbos.launch()
    try:
        prefix = uuid.uuid4().hex[:8]
        started = time.perf_counter()
        for i in range(workload.runs):
            with SetWorkflowID(f"bench-{prefix}-{i}"):
                bench(workload.steps, workload.side_effect)
        seconds = time.perf_counter() - started
    finally:
        Dbos.destroy()
        reset_schema(workload.database_url, SCHEMA, create=False)
    return from_intervals(DBOS, steps=workload.total_steps, seconds=seconds, intervals_ms=clock.intervals_ms)


if __name__ == "__main__":
    main(run_dbos)
