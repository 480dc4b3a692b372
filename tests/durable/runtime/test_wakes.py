"""Armed timers (durable/runtime/wakes.py): one thread per process wakes each armed run at its due time, never
before it, those due together in one statement."""
import threading
import time

import pytest

from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import wakes
from tests.durable.claims import advance
from tests.durable.runtime.test_waits import start

pytestmark = pytest.mark.django_db(transaction=True)


def test_timers_armed_together_each_wake_their_run_at_its_own_due_time_from_one_thread(tmp_path):
    runs = [advance(start("test-sleep", tmp_path, key=f"W-{n}", seconds=seconds))
            for n, seconds in enumerate((2.0, 2.3, 2.3, 2.7))]  # not due before they are armed, on a busy machine
    due = dict(Run.objects.filter(id__in=[run.id for run in runs]).values_list("id", "next_attempt_at"))
    assert wakes.arm_timers(5.0) == 4 and wakes.arm_timers(5.0) == 0  # each armed once
    deadline = time.monotonic() + 15
    while Run.objects.filter(id__in=due, status=RunStatus.WAITING).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    woken = Run.objects.filter(id__in=due).values_list("id", "status", "updated_at", "enqueued_at")
    for run_id, status, woken_for, sent_at in woken:
        assert status == RunStatus.PENDING
        assert woken_for == due[run_id] and sent_at >= due[run_id]  # the due time it woke for, and not before it
    assert [thread.name for thread in threading.enumerate()].count("durable-timers") == 1
    assert all(advance(run).status == RunStatus.SUCCEEDED for run in runs)


def test_whoever_holds_the_alarms_lock_never_waits_for_the_fork_guard_or_the_database(tmp_path, monkeypatch):
    """Threads parking runs arm their timers in a commit hook, holding their connection (one of a pool's): a holder
    of the alarm's lock waiting for a connection, or for the fork guard the sweeper holds while it arms, wedged a
    whole worker (durable_bench --rate-limit). Every database statement and fork guard of the timers is watched."""
    from contextlib import contextmanager

    from django.db import connection

    held_when = []
    guard = wakes.between_forks

    @contextmanager
    def watched_guard():
        held_when.append(("fork guard", wakes._alarm._is_owned()))
        with guard():
            yield

    def watched_statement(execute, sql, params, many, context):
        held_when.append((sql[:30], wakes._alarm._is_owned()))
        return execute(sql, params, many, context)

    monkeypatch.setattr(wakes, "between_forks", watched_guard)
    run = advance(start("test-sleep", tmp_path, key="W-lock", seconds=1.0))
    with connection.execute_wrapper(watched_statement):
        assert wakes.arm_timers(5.0) == 1  # the sweeper's arming reads the database
    deadline = time.monotonic() + 15
    while Run.objects.get(id=run.id).status == RunStatus.WAITING and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # the alarm thread, idle again, gives its connection back under the fork guard
    assert Run.objects.get(id=run.id).status == RunStatus.PENDING
    assert any(what == "fork guard" for what, _ in held_when) and any(what != "fork guard" for what, _ in held_when)
    assert [what for what, held in held_when if held] == []
