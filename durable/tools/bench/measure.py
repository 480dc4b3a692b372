"""What the benchmark reports, computed from the database and the workers' own counts."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from uuid import UUID

from django.db.models import Max

from durable.tools.bench.compare import percentile
from durable.models import Checkpoint, Run


@dataclass
class BenchResult:
    runs: int
    steps: int
    seconds: float
    step_p50_ms: float
    step_p99_ms: float
    commits: int
    advance_tasks: int

    @property
    def workflows_per_second(self) -> float:
        return self.runs / self.seconds

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds

    @property
    def commits_per_step(self) -> float:
        return self.commits / self.steps


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


def worker_totals(stats_dir: Path) -> tuple[int, int]:
    commits = tasks = 0
    for path in stats_dir.glob("*.json"):
        stats = json.loads(path.read_text())
        commits += stats["commits"]
        tasks += stats["advance_tasks"]
    return commits, tasks


def measure(run_ids: list[UUID], steps_per_run: int, started: datetime, stats_dir: Path) -> BenchResult:
    finished = Run.objects.filter(id__in=run_ids).aggregate(last=Max("finished_at"))["last"]
    intervals = step_intervals_ms(run_ids)
    commits, tasks = worker_totals(stats_dir)
    return BenchResult(
        runs=len(run_ids), steps=len(run_ids) * steps_per_run, seconds=(finished - started).total_seconds(),
        step_p50_ms=percentile(intervals, 50), step_p99_ms=percentile(intervals, 99), commits=commits,
        advance_tasks=tasks,
    )
