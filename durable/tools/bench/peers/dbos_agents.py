"""DBOS Transact on the agents workload: a queue with `worker_concurrency`, served by W processes.

Each process launches DBOS on the benchmark's Postgres (system tables in a schema of their own, a pool of
`--pool-size` connections) and registers the queue `bench-agents` with `worker_concurrency` = `--worker-runs`
and a 0.1 s polling interval (DBOS' default is 1 s). A workflow makes `--calls` model calls, each a
`@DBOS.step` calling the fake model server through the client durable's runs call with (model_server.ask: a
keep-alive connection per thread; the step's retries off, as DBOS' default is). On `go`
the first process enqueues every workflow (ids `prefix-i`) and watches the queue until each has ended; it
reports the latest `updated_at` of a finished workflow as the finish.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from durable.tools.bench.compare import DBOS
from durable.tools.bench.model_server import ask as ask_model
from durable.tools.bench.peers import reset_schema
from durable.tools.bench.peers.agents import AGENT_RUNNERS, runner_main

SCHEMA = AGENT_RUNNERS[DBOS].schema
QUEUE = "bench-agents"
CALL_TIMEOUT_SECONDS = 30.0


def run(args: Any, wait_for_go: Callable[[], float]) -> dict[str, Any] | None:
    from dbos import DBOS, SetWorkflowID

    @DBOS.step()
    def ask(run_id: str, step: int) -> dict[str, Any]:
        return ask_model(args.model_url, run_id, step, CALL_TIMEOUT_SECONDS)  # the client durable's runs call with

    @DBOS.workflow()
    def agent(run_id: str, calls: int) -> int:
        for step in range(1, calls + 1):
            ask(run_id, step)
        return calls

    url = args.database_url.replace("postgres://", "postgresql://", 1)  # SQLAlchemy's name for the dialect
    if args.index == 0:
        reset_schema(args.database_url, SCHEMA, create=False)
    DBOS(config={"name": "durable-bench-agents", "system_database_url": url, "dbos_system_schema": SCHEMA,
                 "sys_db_pool_size": args.pool_size, "log_level": "WARNING"})
    DBOS.launch()
    queue = DBOS.register_queue(QUEUE, worker_concurrency=args.worker_runs, polling_interval_sec=0.1)
    wait_for_go()
    if args.index != 0:
        return None
    for i in range(args.runs):
        with SetWorkflowID(f"{args.prefix}-{i}"):
            queue.enqueue(agent, f"{args.prefix}-{i}", args.calls)
    return _watch(args.database_url, args.prefix, args.runs)


def _watch(database_url: str, prefix: str, runs: int) -> dict[str, Any]:
    """Poll DBOS' workflow table until every workflow of this invocation has ended."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                f'SELECT count(*) FILTER (WHERE status = %s), count(*) FILTER (WHERE status IN (%s, %s, %s)), '
                f'max(updated_at) FILTER (WHERE status = %s) FROM "{SCHEMA}".workflow_status '
                f"WHERE workflow_uuid LIKE %s",
                ["SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", "SUCCESS", f"{prefix}-%"],
            ).fetchone()
            assert row is not None
            succeeded, failed, newest = row
            if succeeded + failed >= runs:
                error = ""
                if failed:
                    first = conn.execute(f'SELECT status, error FROM "{SCHEMA}".workflow_status WHERE workflow_uuid '
                                         "LIKE %s AND status <> %s LIMIT 1", [f"{prefix}-%", "SUCCESS"]).fetchone()
                    error = f"{failed} workflows ended {first[0] if first else 'in error'}: {first[1] if first else ''}"
                return {"succeeded": succeeded, "failed": failed, "finished": (newest or 0) / 1000, "error": error}
            time.sleep(0.05)


if __name__ == "__main__":
    runner_main(run)
