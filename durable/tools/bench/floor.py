"""The floor: what one INSERT+COMMIT per step costs with plain psycopg, nothing else."""
from __future__ import annotations

import time

from durable.tools.bench.compare import FLOOR, SystemResult, from_intervals
from durable.tools.bench.peers import StepClock, Workload, main

TABLE = "durable_bench_floor"
INSERT = f"INSERT INTO {TABLE} (run, seq, state) VALUES (%s, %s, %s)"


def run_floor(workload: Workload) -> SystemResult:
    """Each step is one autocommit INSERT of a checkpoint-like row into a scratch table."""
    import psycopg
    from psycopg.types.json import Jsonb

    from durable.tools.bench.cpu import process_cpu_seconds
    from durable.tools.bench.downstream import downstream

    clock = StepClock()
    with psycopg.connect(workload.database_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (run integer, seq integer, state jsonb NOT NULL, "
                     "created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (run, seq))")
        backend = conn.info.backend_pid
        cpu_before = (process_cpu_seconds() or 0.0, process_cpu_seconds(backend) or 0.0)
        started = time.perf_counter()
        for run in range(workload.runs):
            clock.start_workflow()
            for seq in range(1, workload.steps + 1):
                conn.execute(INSERT, (run, seq, Jsonb({"n": seq})))
                clock.tick()
            if workload.side_effect:
                key = f"floor-{run}"
                outcome = downstream.execute(f"{key}:charge", key, {"amount": workload.steps})
                conn.execute(INSERT, (run, workload.steps + 1, Jsonb({"n": workload.steps, **outcome.result})))
                clock.tick()
        seconds = time.perf_counter() - started
        cpu = ((process_cpu_seconds() or 0.0) - cpu_before[0], (process_cpu_seconds(backend) or 0.0) - cpu_before[1])
        conn.execute(f"DROP TABLE {TABLE}")
    return from_intervals(FLOOR, steps=workload.total_steps, seconds=seconds, intervals_ms=clock.intervals_ms,
                          cpu=cpu)


if __name__ == "__main__":
    main(run_floor)
