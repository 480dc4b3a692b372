"""Many runs in flight in one worker process (issue 37): Celery's threads pool, connections from a pool, cancel.

Each test starts real `celery worker` processes on the threads pool, on a queue of its own, with Postgres and the
Redis broker; the calls block their thread for a while, as a model call does. On SQLite (one writer at a time, no
connection pool: the embedded default runs 4 runs at once) the same tests run a handful of runs.
"""
from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import dispatch
from durable.tools.processes import WorkerProcess, database_url
from tests.durable.workflows import calls_in
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def many(on_postgres: int) -> int:
    """How many runs in flight a test holds: hundreds on Postgres, a few on SQLite."""
    return on_postgres if connection.vendor == "postgresql" else 8


def start_runs(count: int, calls_file: str, *, seconds: float, key: str, **extra: object) -> list[str]:
    """Runs created first and sent together, so the worker has all of them in flight at once."""
    runs = [services.start_run(workflow="test-slow-calls", business_key=f"{key}-{n}", enqueue=False,
                               input={"calls_file": calls_file, "seconds": seconds, **extra})[0] for n in range(count)]
    for run in runs:
        dispatch.enqueue(run.id)
    return [str(run.id) for run in runs]


def statuses(run_ids: list[str]) -> Counter[str]:
    return Counter(Run.objects.filter(id__in=run_ids).values_list("status", flat=True))


def calls_made(calls_file: str, what: str) -> Counter[tuple[str, str]]:
    """(run, call) -> how often it started (or ended)."""
    return Counter((line.split()[1], line.split()[2]) for line in calls_in(calls_file) if line.startswith(what))


class ConnectionWatch:
    """The most connections one application name held at once, read from pg_stat_activity while the test waits."""

    def __init__(self, application_name: str) -> None:
        self.name = application_name
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        import psycopg

        if connection.vendor != "postgresql":
            return  # SQLite: a file, no connections to count
        with psycopg.connect(database_url(), autocommit=True) as watcher:
            while not self._done.wait(0.05):
                (count,) = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                           [self.name]).fetchone()  # type: ignore[misc]
                self.peak = max(self.peak, count)


def named(application_name: str) -> str:
    """The test database's URL with an application name, so its connections can be counted."""
    return f"{database_url()}?application_name={application_name}"


def test_one_worker_process_with_a_pool_of_ten_connections_finishes_500_runs_in_flight_each_call_made_once(
        own_queue, calls_file, worker_log_dir):
    runs = many(500)
    env = {"DURABLE_WORKER_RUNS": str(runs), "DURABLE_DB_POOL_SIZE": "10", "DURABLE_WORKER_SWEEPS": "false"}
    if connection.vendor == "postgresql":
        env["DATABASE_URL"] = named("durable-500-in-flight")
    with WorkerProcess(env=env, pool="threads", concurrency=runs, name="in-flight",
                       log_path=worker_log_dir / "in-flight-500.log"), ConnectionWatch("durable-500-in-flight") as seen:
        run_ids = start_runs(runs, calls_file, seconds=1.0, key="many")
        wait_for(lambda: statuses(run_ids)[RunStatus.SUCCEEDED] == runs, timeout=120,
                 what=f"{runs} runs in flight to succeed")
    started, ended = calls_made(calls_file, "start"), calls_made(calls_file, "end")
    assert len(started) == 2 * runs and set(started.values()) == {1}, "a call was made twice"
    assert ended == started
    if connection.vendor == "postgresql":
        assert 0 < seen.peak <= 10, f"the worker held {seen.peak} connections with a pool of 10"


def test_a_worker_killed_with_hundreds_of_runs_in_flight_leaves_each_to_another_worker_and_no_side_effect_twice(
        own_queue, calls_file, sandbox, worker_log_dir):
    fast_lease = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1",
                  "DURABLE_HTTP_TIMEOUT_SECONDS": "1", "DURABLE_WORKER_RUNS": "300"}
    runs = many(300)
    doomed = WorkerProcess(env=fast_lease, pool="threads", concurrency=runs, name="doomed-threads",
                           log_path=worker_log_dir / "doomed-threads.log").start()
    rescuer = WorkerProcess(env=fast_lease, pool="threads", concurrency=runs, name="rescuer-threads",
                            log_path=worker_log_dir / "rescuer-threads.log")
    try:
        run_ids = start_runs(runs, calls_file, seconds=0.5, key="killed", calls=3, ticket=True)
        wait_for(lambda: len(calls_made(calls_file, "start")) >= runs, timeout=60, what="every run's call in flight")
        rescuer.launch()  # it boots while the leases run out; every message is the doomed worker's already
        doomed.kill()
        assert statuses(run_ids)[RunStatus.SUCCEEDED] < runs  # killed with runs unfinished
        rescuer.wait_ready()
        wait_for(lambda: statuses(run_ids)[RunStatus.SUCCEEDED] == runs, timeout=120, what="every run to resume")
    finally:
        doomed.stop()
        rescuer.stop()
    tickets = sandbox.state.calls_snapshot()["tickets"]["effects_by_business_key"]
    assert sorted(tickets) == sorted(f"T-{run_id}" for run_id in run_ids)
    assert set(tickets.values()) == {1}, "a ticket was opened twice"


def test_a_run_cancelled_during_a_slow_call_frees_its_worker_for_the_next_run_while_the_call_is_still_out(
        own_queue, calls_file, worker_log_dir):
    """One run at a time (concurrency 1): the next run can only finish once the cancelled one let go of the slot."""
    with WorkerProcess(env={"DURABLE_HTTP_TIMEOUT_SECONDS": "2"}, pool="threads", concurrency=1, name="cancel",
                       log_path=worker_log_dir / "cancel.log"):
        (slow,) = start_runs(1, calls_file, seconds=20.0, key="slow", calls=1)
        wait_for(lambda: calls_made(calls_file, "start"), what="the slow call to start")
        services.cancel_run(run_id=slow, user=None, source="test", reason="no longer wanted")
        (quick,) = start_runs(1, calls_file, seconds=0.0, key="quick", calls=1)
        wait_for(lambda: statuses([quick])[RunStatus.SUCCEEDED] == 1, what="the next run to finish")
    assert (slow, "call0") not in calls_made(calls_file, "end")  # the cancelled call had not returned yet
    assert statuses([slow]) == {RunStatus.CANCELLED: 1}
