"""A real Celery worker counts into the same metrics directory as this process, and logs JSON lines with the run's fields."""
from __future__ import annotations

import json

import pytest

from durable import services
from durable.engine.states import RunStatus
from durable.tools.processes import WorkerProcess
from tests.durable.metered import counting
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

COUNTING = {"workflow": "test-counting", "version": "1"}


def test_a_workers_counts_add_up_with_this_process_and_its_lines_are_json_with_the_run(
        own_queue, calls_file, worker_log_dir):
    log_path = worker_log_dir / "json-logs.log"
    log_path.unlink(missing_ok=True)
    with counting("activity_retry_total", **COUNTING) as retries, \
            counting("workflow_resume_total", **COUNTING) as resumes:
        with WorkerProcess(env={"DURABLE_LOG_FORMAT": "json"}, log_path=log_path, name="json-logs"):
            run, _ = services.start_run(workflow="test-counting", business_key="obs",
                                        input={"calls_file": calls_file, "fail_times": 1})
            wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the run to succeed after a retry")
    assert retries.by == 1 and resumes.by >= 1  # counted in the worker, read here

    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    [retry] = [e for e in entries if e["message"].startswith("step s2 failed")]
    assert {k: retry[k] for k in ("run_id", "workflow", "version", "step", "attempt")} == {
        "run_id": str(run.id), "workflow": "test-counting", "version": 1, "step": "s2", "attempt": 0}
