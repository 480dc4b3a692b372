"""The sweeper on a big database: seed runs as the console benchmark does, then time the query
that finds runs to re-send (durable.runtime.sweeper.due_runs), which every beat runs."""
from __future__ import annotations

import statistics
import time

from django.db import connection

from durable.runtime import sweeper
from durable.tools.bench import console


def time_due_runs(repeat: int = 20) -> tuple[float, float, int]:
    """(p50 ms, max ms, runs found) of `due_runs()` after one warm-up."""
    found = len(sweeper.due_runs())
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        sweeper.due_runs()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), max(timings), found


def run_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM durable_run")
        return cursor.fetchone()[0]


def seed_and_time(runs: int, repeat: int = 20, *, keep: bool = False) -> list[str]:
    """Seed `runs` more runs (console.seed), time the sweeper's query, and remove them again unless `keep`
    (then `durable_console_bench --reuse` times the console on the same table)."""
    started = time.perf_counter()
    console.seed(runs, approvals=min(runs // 100, 10_000))
    seeded = time.perf_counter() - started
    try:
        p50, worst, found = time_due_runs(repeat)
        total = run_count()
    finally:
        if not keep:
            console.clear()
    return [f"  seeded {runs:,} runs in {seeded:.0f} s (table now {total:,} runs)",
            f"  sweeper's due_runs(): p50 {p50:.1f} ms, max {worst:.1f} ms over {repeat} beats, {found} run(s) due"]
