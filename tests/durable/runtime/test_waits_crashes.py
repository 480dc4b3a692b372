"""Child runs through crashes and races the real-worker proof found (test_waits_worker.py, the fault drill): a
child's end never loses its parent's wake, a parent's cancel never misses a child starting at that moment, a child
is this run's own or none, and a tool's child runs are in the tool's scope."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from durable import services
from durable.engine.errors import LeaseLost
from durable.engine.replay import ReplayCursor
from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import wakes
from durable.runtime.visit import Visit
from durable.store import base
from durable.tools.workload import tool_account
from tests.conftest import user_with_roles
from tests.durable.claims import advance
from tests.durable.ledger_workflows import SimulatedCrash

pytestmark = pytest.mark.django_db(transaction=True)


def start(workflow: str, tmp_path, key: str, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(tmp_path / "calls"), **given},
                                business_key=key)
    return run


def crash_once(monkeypatch, module, name: str) -> None:
    """`module.name` raises SimulatedCrash the first time it is called: the process died there."""
    real, crashed = getattr(module, name), []

    def crashing(*args, **kwargs):
        if not crashed:
            crashed.append(True)
            raise SimulatedCrash()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, crashing)


def woken_by_the_sweeper(run: Run) -> Run:
    """The run's due time passes (the database's clock, moved on) and the sweeper wakes it."""
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.next_attempt_at is not None
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert wakes.wake_due() == [run.id]
    return advance(run)


def test_a_child_that_dies_between_its_end_and_its_parents_wake_still_wakes_it(tmp_path, monkeypatch, settings):
    settings.DURABLE_PENDING_GRACE_SECONDS = 10
    parent = advance(start("test-parent", tmp_path, "P-1"))
    assert parent.status == RunStatus.WAITING and parent.next_attempt_at is None  # only the child's end wakes it
    crash_once(monkeypatch, wakes, "wake_parent")
    before = timezone.now()
    with pytest.raises(SimulatedCrash):
        advance(Run.objects.get(parent_run=parent))  # its end is committed, the wake never sent
    assert Run.objects.get(parent_run=parent).status == RunStatus.SUCCEEDED
    parent.refresh_from_db()
    assert parent.status == RunStatus.WAITING
    assert before + timedelta(seconds=10) <= parent.next_attempt_at <= timezone.now() + timedelta(seconds=10)
    parent = woken_by_the_sweeper(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    assert parent.output["outputs"] == [{"doubled": 0}]


def test_a_child_cancelled_by_a_process_that_dies_before_the_wake_still_wakes_its_parent(tmp_path, monkeypatch):
    operator = user_with_roles("crash-operator", "operator")
    parent = advance(start("test-parent", tmp_path, "P-2", child_waits=True, catch_child_failure=True))
    child = Run.objects.get(parent_run=parent)
    crash_once(monkeypatch, wakes, "wake_parent")
    with pytest.raises(SimulatedCrash):
        services.cancel_run(run_id=child.id, user=operator, source="api")
    parent = woken_by_the_sweeper(parent)
    assert parent.output["child_error"].startswith("CANCELLED")


def test_a_child_woken_parent_that_finds_its_child_still_running_parks_again_without_a_due_time(tmp_path):
    parent = advance(start("test-parent", tmp_path, "P-3", child_waits=True))
    child = Run.objects.get(parent_run=parent)
    with pytest.raises(SimulatedCrash), wakes.child_ends(child.id, parent.id):
        raise SimulatedCrash  # the child's worker dies before its end is written
    parent = woken_by_the_sweeper(parent)
    assert parent.status == RunStatus.WAITING and parent.next_attempt_at is None


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="SQLite runs one writing transaction at a time")
def test_a_childs_end_while_its_parent_parks_wakes_the_parent(tmp_path, monkeypatch):
    """The parent read its children (the child still RUNNING) and has not parked yet when the child's end commits:
    the child's wake waits for the parent's row, and finds it parked."""
    parent = advance(start("test-parent", tmp_path, "P-4"))
    child = Run.objects.get(parent_run=parent)
    Run.objects.filter(id=parent.id).update(status=RunStatus.PENDING)  # woken for another reason: it looks again
    inside, go = threading.Event(), threading.Event()
    real_park = base.RunStore._park

    def slow_park(self, *args, **kwargs):
        if threading.current_thread().name == "parent":
            inside.set()
            go.wait(30)  # the children were read, the row is held, the park is not written
        return real_park(self, *args, **kwargs)

    monkeypatch.setattr(base.RunStore, "_park", slow_park)
    threads = [threading.Thread(target=_advance_and_close, args=(parent.id,), name="parent"),
               threading.Thread(target=_advance_and_close, args=(child.id,), name="child")]
    threads[0].start()
    assert inside.wait(30)
    threads[1].start()
    deadline = time.monotonic() + 30
    while threads[1].is_alive() and not _waiting_for_a_lock() and time.monotonic() < deadline:
        time.sleep(0.05)
    go.set()
    for thread in threads:
        thread.join(30)
    assert Run.objects.get(id=child.id).status == RunStatus.SUCCEEDED
    assert Run.objects.get(id=parent.id).status == RunStatus.PENDING  # woken: it will find its child ended
    assert advance(parent).status == RunStatus.SUCCEEDED


def _advance_and_close(run_id) -> None:
    from durable.runtime import executor

    try:
        executor.advance(run_id)
    finally:
        connection.close()


def _waiting_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def test_a_parent_cancelled_as_its_step_starts_a_child_starts_none(tmp_path, monkeypatch):
    """The cancel commits after the parent's visit began and before it starts its child: no child outlives it."""
    operator = user_with_roles("race-operator", "operator")
    run = start("test-parent", tmp_path, "P-5")
    real_start_run = services.start_run

    def cancelled_first(**kwargs):
        if kwargs.get("parent_run_id") == run.id:
            raise AssertionError("a child was started for a cancelled parent")
        return real_start_run(**kwargs)

    from durable.runtime import waits

    real_child_run = waits._start_child_run

    def cancel_then_start(ctx, *args):
        services.cancel_run(run_id=run.id, user=operator, source="api")
        monkeypatch.setattr(services, "start_run", cancelled_first)
        return real_child_run(ctx, *args)

    monkeypatch.setattr(waits, "_start_child_run", cancel_then_start)
    advance(run)  # the step's LeaseLost ends the task quietly
    assert Run.objects.get(id=run.id).status == RunStatus.CANCELLED
    assert not Run.objects.filter(parent_run=run).exists()


def test_a_child_key_taken_by_another_runs_child_fails_the_step_saying_so(tmp_path):
    first = advance(start("test-parent", tmp_path, "P-6", child_waits=True))
    second = advance(start("test-parent", tmp_path, "P-7", child_waits=True))  # the same child keys: child-0
    assert first.status == RunStatus.WAITING
    assert second.status == RunStatus.FAILED
    assert second.error["kind"] == "child_not_started"
    assert "already has an active run for business key 'child-0'" in second.error["message"]
    assert Run.objects.filter(workflow_name="test-child").count() == 1
    assert Run.objects.get(workflow_name="test-child").parent_run_id == first.id


def test_a_tools_child_run_is_in_the_tools_scope(tmp_path, settings):
    account = tool_account("drill")
    parent, _ = services.start_run(workflow="test-parent", input={"calls_file": str(tmp_path / "calls")},
                                   business_key="P-8", user=account)
    advance(parent)
    child = Run.objects.get(parent_run=parent)
    assert child.created_by_id == account.pk  # the tool's sweeper takes it up; production's leaves it alone
    settings.DURABLE_SCOPE_CREATED_BY = account.pk
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(id=child.id).update(updated_at=an_hour_ago, enqueued_at=an_hour_ago)  # its message lost
    from durable.runtime.sweeper import due_runs

    assert due_runs() == [child.id]
    settings.DURABLE_SCOPE_CREATED_BY = None
    assert due_runs() == []


def test_a_lost_lease_starts_no_child(tmp_path):
    run = start("test-parent", tmp_path, "P-9")
    store = base.RunStore()
    lease, _ = store.claim(run.id, "worker-a", 10)
    Run.objects.filter(id=run.id).update(fencing_token=lease.token + 1)  # another worker took it over
    from durable.runtime.waits import _start_child_run

    visit = Visit(run_id=run.id, business_key=run.business_key, workflow_name=run.workflow_name,
                  workflow_version=run.workflow_version, step="delegate", attempt=1, lease=lease, store=store,
                  cursor=ReplayCursor("delegate", []))
    with pytest.raises(LeaseLost):
        _start_child_run(visit, "test-child", {"value": 1}, "child-x")
    assert not Run.objects.filter(parent_run=run).exists()
