"""What the benchmark reports, computed from the database and the workers' own counts."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from uuid import UUID

from django.db.models import Max

from durable.models import Checkpoint, Run
from durable.tools.bench.compare import percentile


@dataclass
class BenchResult:
    runs: int
    steps: int
    seconds: float
    step_p50_ms: float
    step_p99_ms: float
    commits: int
    advance_tasks: int
    worker_cpu: float = 0.0  # CPU seconds of the worker processes, from their first task
    backend_cpu: float = 0.0  # and of the Postgres backends they used (0 on SQLite)
    run_updates: tuple[int, int] = (0, 0)  # durable_run's UPDATEs meanwhile, and how many were heap-only (Postgres)

    @property
    def workflows_per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds

    @property
    def commits_per_step(self) -> float:
        return self.commits / self.steps

    @property
    def worker_cpu_per_1000_steps(self) -> float:
        return self.worker_cpu / self.steps * 1000

    @property
    def backend_cpu_per_1000_steps(self) -> float:
        return self.backend_cpu / self.steps * 1000


def step_intervals_ms(run_ids: list[UUID]) -> list[float]:
    """Time between consecutive step checkpoints of a run: one step's whole cost."""
    intervals: list[float] = []
    previous: tuple[UUID, datetime] | None = None
    rows = Checkpoint.objects.filter(run_id__in=run_ids, seq__gte=1).order_by("run_id", "seq")
    for run_id, created in rows.values_list("run_id", "created_at").iterator(chunk_size=5000):
        if previous is not None and previous[0] == run_id:
            intervals.append((created - previous[1]).total_seconds() * 1000)
        previous = (run_id, created)
    return intervals


@dataclass
class WorkerTotals:
    commits: int = 0
    advance_tasks: int = 0
    worker_cpu: float = 0.0
    backend_cpu: float = 0.0


def worker_totals(stats_dir: Path) -> WorkerTotals:
    """What the workers counted, summed over their stats files."""
    totals = WorkerTotals()
    for path in stats_dir.glob("*.json"):
        stats = json.loads(path.read_text())
        totals.commits += stats["commits"]
        totals.advance_tasks += stats["advance_tasks"]
        totals.worker_cpu += stats.get("worker_cpu", 0.0)
        totals.backend_cpu += stats.get("backend_cpu", 0.0)
    return totals


def run_table_updates() -> tuple[int, int]:
    """durable_run's updated rows so far, and how many were heap-only (HOT); (0, 0) off Postgres.
    Counts reach the view once each backend flushes them: read it after the workers exit."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0, 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'durable_run'")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, 0)


def measure(run_ids: list[UUID], steps_per_run: int, started: datetime, stats_dir: Path) -> BenchResult:
    finished = Run.objects.filter(id__in=run_ids).aggregate(last=Max("finished_at"))["last"]
    intervals = step_intervals_ms(run_ids)
    totals = worker_totals(stats_dir)
    return BenchResult(
        runs=len(run_ids), steps=len(run_ids) * steps_per_run, seconds=(finished - started).total_seconds(),
        step_p50_ms=percentile(intervals, 50), step_p99_ms=percentile(intervals, 99), commits=totals.commits,
        advance_tasks=totals.advance_tasks, worker_cpu=totals.worker_cpu, backend_cpu=totals.backend_cpu,
    )
