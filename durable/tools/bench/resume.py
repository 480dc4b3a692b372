"""Resuming a run with a long history: what a worker reads before its next step, timed in-process.

One run of a trivial workflow gets N recorded activity results (as N calls of its next step
made before a crash would have left them); each round claims the run, reads its newest
checkpoint and its recorded results (the executor's resume), and gives it back.
"""
from __future__ import annotations

import statistics
import time

from django.utils import timezone

from durable import services
from durable.models import JournalEntry
from durable.store import store
from durable.tools.bench.workflows import bench_workflow
from durable.tools.workload import delete_runs


def time_resume(activities: int, repeat: int = 30) -> list[str]:
    workflow = bench_workflow(10)
    run, _ = services.start_run(workflow=workflow.name, input={}, business_key=f"bench-resume-{activities}",
                                enqueue=False)
    try:
        JournalEntry.objects.bulk_create(
            JournalEntry(run_id=run.id, kind=JournalEntry.Kind.ACTIVITY, step="step1", call_index=i,
                         name="llm.plan", result={"intent": "refund", "i": i}, created_at=timezone.now())
            for i in range(activities))
        db, timings, replayed = store(), [], 0
        for _ in range(repeat + 1):  # the first one warms up
            started = time.perf_counter()
            claimed = db.claim(run.id, "bench-resume", 60)
            if claimed is None:
                raise RuntimeError(f"run {run.id} could not be claimed: another worker holds it")
            lease, _ = claimed
            db.resume_point(lease)
            replayed = len(db.recorded_calls(lease, "step1"))
            timings.append((time.perf_counter() - started) * 1000)
            db.release(lease)
    finally:
        delete_runs([run.id])
    timings = sorted(timings[1:])
    return [f"  resume with {replayed:,} recorded activity results (claim, newest checkpoint, recorded results): "
            f"p50 {statistics.median(timings):.2f} ms, max {timings[-1]:.2f} ms over {repeat} resumes"]
