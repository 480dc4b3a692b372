"""Named limits held across real Celery workers: a concurrency limit is never exceeded whatever the
runs, a rate limit never passed in any 1-second window at the callee over two workers, a 429 with Retry-After
pauses the limit for every run, and parked runs are woken by priority then arrival. Each call is made once."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from durable import services
from durable.engine.states import RunStatus
from durable.models import LimitGate, LimitTicket, Run
from durable.tools.processes import WorkerProcess
from tests.durable.limit_workflows import busiest_window, most_in_flight, starts_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def workers(log_dir: Path, limits: dict[str, dict[str, object]], count: int = 2,
            threads: int = 3) -> list[WorkerProcess]:
    """Worker processes with these limits (DURABLE_LIMITS as JSON, as an operator sets it), each running a few runs
    at once on Celery's threads pool."""
    env = {"DURABLE_LIMITS": json.dumps(limits), "DURABLE_SWEEP_SECONDS": "0.5", "DURABLE_PENDING_GRACE_SECONDS": "5"}
    return [WorkerProcess(env=env, pool="threads", concurrency=threads, log_path=log_dir / f"limits-{number}.log",
                          name=f"limits-{number}").start() for number in range(count)]


def start(calls_file: str, key: str, priority: int = 0, **given: object) -> Run:
    run, _ = services.start_run(workflow="test-limited", input={"calls_file": calls_file, **given}, business_key=key,
                                priority=priority)
    return run


def all_succeed(runs: list[Run], timeout: float = 60.0) -> None:
    wait_for(lambda: all(status_of(run.id) == RunStatus.SUCCEEDED for run in runs), timeout=timeout,
             what="every limited run to succeed")


def test_a_concurrency_limit_is_never_exceeded_across_workers(own_queue, calls_file, worker_log_dir, settings):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 2}}
    started = workers(worker_log_dir, settings.DURABLE_LIMITS)
    try:
        runs = [start(calls_file, f"R{number}", calls=3, hold_ms=60) for number in range(10)]
        all_succeed(runs)
    finally:
        for worker in started:
            worker.stop()
    assert most_in_flight(calls_file) == 2  # six runs at once asked, two calls went out at a time
    made = Counter(label for _, label in starts_in(calls_file))
    assert len(made) == 30 and set(made.values()) == {1}  # every call once
    assert not LimitTicket.objects.filter(state="HELD").exists()


def test_a_rate_limit_is_never_passed_in_any_second_over_two_workers(own_queue, calls_file, worker_log_dir,
                                                                      settings):
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "20/s"}}
    started = workers(worker_log_dir, settings.DURABLE_LIMITS)
    try:
        runs = [start(calls_file, f"R{number}", calls=10) for number in range(12)]
        all_succeed(runs)
    finally:
        for worker in started:
            worker.stop()
    assert len(starts_in(calls_file)) == 120
    assert busiest_window(calls_file, 1.0) <= 20


def test_a_429_with_retry_after_pauses_the_limit_for_every_run(own_queue, calls_file, worker_log_dir, settings,
                                                               tmp_path):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 5}}
    fail = tmp_path / "fail"
    fail.touch()
    started = workers(worker_log_dir, settings.DURABLE_LIMITS, count=1)
    try:
        asked = start(calls_file, "A", fail_file=str(fail), retry_after=2)
        gate = wait_for(lambda: LimitGate.objects.filter(limit="test-limit", key="", paused_until__isnull=False)
                        .first(), what="the limit to be paused")
        others = [start(calls_file, f"B{number}") for number in range(3)]
        all_succeed([asked, *others])
    finally:
        for worker in started:
            worker.stop()
    pause_ends = gate.paused_until.timestamp()
    calls = starts_in(calls_file)
    assert [label for _, label in calls][0] == "A:0" and len(calls) == 5  # A's 429, A's retry, three others
    assert all(at >= pause_ends - 0.005 for at, _ in calls[1:])  # nothing went out before the pause ended


def test_runs_parked_on_a_limit_are_woken_by_priority_then_arrival(own_queue, calls_file, worker_log_dir, settings,
                                                                   tmp_path):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 1}}
    hold = tmp_path / "hold"
    hold.touch()
    started = workers(worker_log_dir, settings.DURABLE_LIMITS, count=1, threads=4)
    try:
        holder = start(calls_file, "holder", hold_file=str(hold))
        wait_for(lambda: LimitTicket.objects.filter(run=holder, state="HELD").exists(), what="the slot to be held")
        queued = []
        for key, priority in (("low-1", 0), ("high", 5), ("low-2", 0)):
            queued.append(start(calls_file, key, priority=priority))
            wait_for(lambda run=queued[-1]: status_of(run.id) == RunStatus.WAITING, what=f"{key} to park")
        hold.unlink()
        all_succeed([holder, *queued])
    finally:
        for worker in started:
            worker.stop()
    assert [label for _, label in starts_in(calls_file)] == ["holder:0", "high:0", "low-1:0", "low-2:0"]
