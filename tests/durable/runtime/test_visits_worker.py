"""A parallel visit cut short by SIGKILL, finished by another real worker: only the unfinished call is made again."""
from __future__ import annotations

import pytest

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry
from durable.tools.processes import WorkerProcess
from tests.durable.visit_workflows import started_calls
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FAST_LEASE = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1"}


def test_sigkill_during_parallel_calls_resumes_making_only_the_call_that_had_not_finished(
        own_queue, calls_file, worker_log_dir):
    doomed = WorkerProcess(env=FAST_LEASE, log_path=worker_log_dir / "doomed.log", name="doomed").start()
    try:
        # c1 takes 4 s, c0 and c2 answer at once: they are recorded while c1 is still in flight.
        run, _ = services.start_run(workflow="test-parallel", business_key="par-kill",
                                    input={"calls_file": calls_file, "delays": [0.0, 4.0, 0.0]})
        recorded = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY)
        wait_for(lambda: recorded.count() == 2, what="c0 and c2 to be recorded while c1 is in flight")
        doomed.kill()
    finally:
        doomed.stop()
    assert sorted(recorded.values_list("call_index", "name")) == [(0, "c0"), (2, "c2")]

    with WorkerProcess(env=FAST_LEASE, beat=True, log_path=worker_log_dir / "rescuer.log", name="rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the rescued run to succeed", timeout=60)

    run.refresh_from_db()
    assert sorted(started_calls(calls_file)) == ["c0", "c1", "c1", "c2"]  # c1 made again, c0 and c2 reused
    assert run.output["results"] == ["c0-result", "c1-result", "c2-result"]
    tokens = dict(recorded.values_list("name", "fencing_token"))
    assert tokens["c1"] > tokens["c0"] == tokens["c2"]  # the rescuer recorded c1 under its newer token
