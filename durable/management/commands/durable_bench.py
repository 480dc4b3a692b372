"""Benchmark: R workflows of S trivial steps through W real worker processes."""
from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from durable import dispatch, services
from durable.bench.measure import BenchResult, measure
from durable.bench.workflows import bench_workflow
from durable.engine.states import RunStatus
from durable.processes import WorkerProcess
from durable.workload import delete_runs, wait_for_runs


class Command(BaseCommand):
    help = "Run R workflows of S trivial steps through W Celery worker processes and report throughput."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--steps", type=int, default=10)
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
        parser.add_argument("--keep", action="store_true", help="keep the benchmark's runs in the database")

    def handle(self, *args: Any, runs: int, steps: int, workers: int, timeout: float, keep: bool, **_: Any) -> None:
        if min(runs, steps, workers) < 1:
            raise CommandError("--runs, --steps and --workers must be at least 1")
        call_command("migrate", verbosity=0, interactive=False)
        # A queue of its own: a running demo worker must not take the benchmark's runs.
        with override_settings(CELERY_TASK_DEFAULT_QUEUE=f"durable-bench-{uuid.uuid4().hex[:8]}"):
            self._bench(runs, steps, workers, timeout, keep)

    def _bench(self, runs: int, steps: int, workers: int, timeout: float, keep: bool) -> None:
        workflow = bench_workflow(steps)
        stats_dir = Path(tempfile.mkdtemp(prefix="durable-bench-"))
        env = {
            "DURABLE_BENCH_STEPS": str(steps), "DURABLE_BENCH_STATS_DIR": str(stats_dir),
            "DURABLE_WORKFLOW_MODULES": ",".join([*settings.DURABLE_WORKFLOW_MODULES, "durable.bench.workflows"]),
            "DURABLE_TIME_SLICE_SECONDS": "60",
        }
        run_ids = [services.start_run(workflow=workflow.name, input={}, business_key=f"bench-{i}", enqueue=False)[0].id
                   for i in range(runs)]
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        pool = [WorkerProcess(env=env, name=f"bench{i}", log_path=logs / f"bench-worker-{i}.log") for i in range(workers)]
        try:
            for worker in pool:
                worker.start()
            started = timezone.now()
            for run_id in run_ids:
                dispatch.enqueue(run_id)
            unfinished = wait_for_runs(run_ids, until={RunStatus.SUCCEEDED}, timeout=timeout)
            if unfinished:
                raise CommandError(f"{unfinished} run(s) unfinished after {timeout:.0f}s")
        finally:
            for worker in pool:
                worker.stop()
        self._report(measure(run_ids, steps, started, stats_dir), workers)
        if not keep:
            delete_runs(run_ids)

    def _report(self, r: BenchResult, workers: int) -> None:
        broker = settings.CELERY_BROKER_URL.split("://")[0]
        self.stdout.write(f"durable_bench: {r.runs} runs x {r.steps // r.runs} steps, {workers} worker(s), "
                          f"database {connection.vendor}, broker {broker}")
        self.stdout.write(f"  wall time            {r.seconds:.2f} s")
        self.stdout.write(f"  workflows/s          {r.workflows_per_second:.1f}")
        self.stdout.write(f"  steps/s              {r.steps_per_second:.1f}")
        self.stdout.write(f"  per-step p50 / p99   {r.step_p50_ms:.2f} ms / {r.step_p99_ms:.2f} ms")
        self.stdout.write(f"  SQL commits          {r.commits} = {r.commits_per_step:.2f} per step "
                          f"(incl. one lease claim per task)")
        self.stdout.write(f"  advance tasks        {r.advance_tasks} = {r.advance_tasks / r.runs:.2f} per run "
                          f"(broker messages per step: {r.advance_tasks / r.steps:.3f})")
