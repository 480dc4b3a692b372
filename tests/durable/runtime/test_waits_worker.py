"""Waits with real worker processes on a real broker (issue 30, "Proof"): events sent before the wait, in a burst,
five times with one key, and across a crash between delivery and consumption; a timer across a worker restart; a
parent killed after starting its child, a child killed after its end, a cancelled parent. The workers sweep
themselves (DURABLE_WORKER_SWEEPS), quickly: a killed worker's run is taken up again within seconds."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings

from durable import send_event, services
from durable.engine.states import RunStatus
from durable.errors import Conflict
from durable.models import JournalEntry, Run, RunEvent, SweepTurn
from durable.runtime.dispatch import drop_queue
from durable.runtime.fault_points import (
    AFTER_CHILD_FINISHED,
    AFTER_CHILD_STARTED,
    AFTER_CHILDREN_ENDED,
    AFTER_EVENT_CONSUMED,
)
from durable.runtime.waits import WAIT_FOR_EVENT
from durable.tools.processes import WorkerProcess
from tests.conftest import user_with_roles
from tests.durable.workflows import calls_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# A short lease and a sweep every second: a killed worker's run is sent again within seconds.
SWEEPING = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1"}


@pytest.fixture(scope="module")
def sweeping_worker(django_db_setup, django_db_blocker, worker_log_dir):
    """One real worker, sweeping, on a queue of this module's own, for the tests that do not kill it."""
    queue = f"durable-test-waits-{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock(), override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        worker = WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "waits.log", name="waits").start()
    yield queue
    worker.stop()
    with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        drop_queue(queue)


@pytest.fixture
def on_worker(sweeping_worker, settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = sweeping_worker


def start(workflow: str, tmp_path: Path, key: str, **given: Any) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(tmp_path / "calls"), **given},
                                business_key=key)
    return run


def parked(run: Run, call_index: int | None = None) -> Callable[[], bool]:
    """The run is WAITING (at that call of its visit, when given)."""
    def waiting() -> bool:
        run.refresh_from_db()
        return run.status == RunStatus.WAITING and (call_index is None or run.waiting_for["call_index"] == call_index)
    return waiting


def ended(run: Run, timeout: float = 60.0) -> Run:
    wait_for(lambda: status_of(run.id) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED),
             timeout=timeout, what=f"run {run.id} to end")
    run.refresh_from_db()
    return run


def at_once(senders: list[Callable[[], Any]]) -> list[Any]:
    """Call each sender on a thread of its own, all released together: a burst, as concurrent webhooks send it."""
    barrier, results, errors = threading.Barrier(len(senders)), [None] * len(senders), []

    def send(number: int) -> None:
        try:
            barrier.wait()
            results[number] = senders[number]()
        except Exception as exc:  # noqa: BLE001  the test reports it below
            errors.append(exc)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=send, args=(n,)) for n in range(len(senders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return results


def consumptions(run: Run) -> list[int]:
    """The event ids the run's waits consumed, as the timeline records each consumption."""
    return [entry["consumed"] for entry in JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.WAIT_ENDED)
            .order_by("id").values_list("detail", flat=True) if "consumed" in entry]


def two_sweeps_later() -> None:
    seen: list[datetime] = []

    def swept_twice() -> bool:
        due = SweepTurn.objects.values_list("due_at", flat=True).first()
        if due is not None and due not in seen:
            seen.append(due)
        return len(seen) >= 3
    wait_for(swept_twice, what="two more sweeps")


def doomed_worker(point: str, tmp_path: Path, log_dir: Path) -> WorkerProcess:
    """A worker that dies as SIGKILL would (no cleanup, no ack) the first time a wait reaches `point`."""
    env = {**SWEEPING, "DURABLE_FAULT_POINTS": point, "DURABLE_FAULT_DIR": str(tmp_path / "faults")}
    return WorkerProcess(env=env, log_path=log_dir / f"doomed-{point}.log", name="doomed").start()


def died_at(worker: WorkerProcess, point: str, tmp_path: Path) -> None:
    wait_for(lambda: worker.process is not None and worker.process.poll() is not None, timeout=60,
             what=f"the worker to die at {point}")
    assert worker.process is not None and worker.process.returncode == 137
    assert [marker.name.rpartition(".")[2] for marker in (tmp_path / "faults").iterdir()] == [point]


# -- Events ------------------------------------------------------------------------------------------------------

def test_an_event_sent_before_the_run_waits_is_consumed_without_parking(on_worker, tmp_path):
    with transaction.atomic():  # the run's message leaves on commit: the event is in its mailbox before any worker
        run = start("test-wait-event", tmp_path, "early", seconds=0)
        delivery = send_event(run_id=run.id, name="reply", payload={"text": "early"}, sender="test")
    assert delivery.created and not delivery.woke
    run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "early"}]]
    assert not JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.WAIT).exists()  # it never parked
    event = RunEvent.objects.get(run=run)
    assert (event.consumed_step, event.consumed_visit) == ("listen", 0)
    assert consumptions(run) == [event.id]


def test_ten_events_sent_in_one_burst_are_each_consumed_once_in_arrival_order(on_worker, tmp_path):
    run = start("test-wait-event", tmp_path, "burst", seconds=0, events=10)
    wait_for(parked(run), what="the run to wait for its first event")
    deliveries = at_once([lambda n=n: send_event(run_id=run.id, name="reply", payload={"n": n}, sender="burst")
                          for n in range(10)])
    # The first wakes it; the others wait in its mailbox, or wake it again if it consumed all and parked meanwhile.
    assert deliveries[0] is not None and any(delivery.woke for delivery in deliveries)
    run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    arrival = list(RunEvent.objects.filter(run=run).order_by("id").values_list("id", "payload"))
    assert [payload for _, payload in run.output["received"]] == [payload for _, payload in arrival]
    assert sorted(payload["n"] for _, payload in arrival) == list(range(10))
    assert consumptions(run) == [event_id for event_id, _ in arrival]  # each once, in arrival order
    assert not RunEvent.objects.filter(run=run, consumed_at__isnull=True).exists()


def test_the_same_event_sent_five_times_with_one_key_is_one_event(on_worker, tmp_path):
    run = start("test-wait-event", tmp_path, "retried-webhook", seconds=0, events=2)
    wait_for(parked(run), what="the run to wait for its first event")
    deliveries = at_once([lambda: send_event(run_id=run.id, name="reply", payload={"text": "hi"},
                                             idempotency_key="hook-1", sender="webhook")] * 5)
    assert len({delivery.event.id for delivery in deliveries}) == 1
    assert sorted(delivery.created for delivery in deliveries) == [False, False, False, False, True]
    wait_for(parked(run, call_index=2), what="the run to consume it and wait for a second event")
    send_event(run_id=run.id, name="reply", payload={"text": "second"}, sender="test")
    run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "hi"}], ["reply", {"text": "second"}]]
    assert RunEvent.objects.filter(run=run).count() == 2
    assert len(consumptions(run)) == 2


def test_a_worker_killed_between_delivery_and_consumption_loses_no_event_and_takes_none_twice(
        own_queue, tmp_path, worker_log_dir):
    doomed = doomed_worker(AFTER_EVENT_CONSUMED, tmp_path, worker_log_dir)
    try:
        run = start("test-wait-event", tmp_path, "killed-consumer", seconds=0, events=2)
        wait_for(parked(run), what="the run to wait for its first event")
        first = send_event(run_id=run.id, name="reply", payload={"n": 1}, sender="test")
        second = send_event(run_id=run.id, name="reply", payload={"n": 2}, sender="test")
        # The worker consumed the first event, recorded it, and died before its step's checkpoint.
        died_at(doomed, AFTER_EVENT_CONSUMED, tmp_path)
    finally:
        doomed.stop()
    assert RunEvent.objects.get(id=first.event.id).consumed_at is not None
    assert RunEvent.objects.get(id=second.event.id).consumed_at is None  # delivered, not consumed
    assert status_of(run.id) == RunStatus.RUNNING  # the dead worker's lease runs out

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "rescuer.log", name="rescuer"):
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"n": 1}], ["reply", {"n": 2}]]
    assert consumptions(run) == [first.event.id, second.event.id]  # each consumed once
    recorded = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, name=WAIT_FOR_EVENT)
    assert sorted(recorded.values_list("call_index", flat=True)) == [1, 2]  # the first was not recorded again
    tokens = dict(recorded.values_list("call_index", "fencing_token"))
    assert tokens[2] > tokens[1]  # the rescuer consumed the second under its own, newer lease


# -- Timers ------------------------------------------------------------------------------------------------------

def test_a_timer_fires_on_time_across_a_worker_restart(own_queue, tmp_path, worker_log_dir):
    first = WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "sleeper-1.log", name="sleeper1").start()
    try:
        run = start("test-sleep", tmp_path, "restart", seconds=8)
        wait_for(parked(run), what="the run to sleep")
        first.kill()  # SIGKILL, with the run parked and its timer perhaps armed in that process
    finally:
        first.stop()
    due = datetime.fromisoformat(run.waiting_for["until"])
    assert run.next_attempt_at == due and run.lease_owner is None

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "sleeper-2.log", name="sleeper2"):
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(tmp_path / "calls") == ["before", "after"]  # "before" was reused, not made again
    fired = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.WAIT_ENDED)
    assert fired.detail == {"timer": "fired", "due": due.isoformat()}
    assert fired.created_at >= due  # never early: the database's clock decided


# -- Child runs --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("point", [AFTER_CHILD_STARTED, AFTER_CHILDREN_ENDED])
def test_a_parent_killed_after_starting_its_child_and_before_its_checkpoint_has_exactly_one_child(
        point, own_queue, tmp_path, worker_log_dir):
    doomed = doomed_worker(point, tmp_path, worker_log_dir)
    try:
        parent = start("test-parent", tmp_path, f"parent-{point}")
        died_at(doomed, point, tmp_path)
    finally:
        doomed.stop()
    assert Run.objects.filter(parent_run=parent).count() == 1

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "rescuer.log", name="rescuer"):
        parent = ended(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    assert parent.output["outputs"] == [{"doubled": 0}]
    assert Run.objects.filter(parent_run=parent).count() == 1  # exactly one child
    assert JournalEntry.objects.filter(run=parent, kind=JournalEntry.Kind.CHILD_STARTED).count() == 1
    assert calls_in(tmp_path / "calls") == ["before"]


def test_a_child_killed_after_its_end_and_before_waking_its_parent_still_wakes_it(
        own_queue, tmp_path, worker_log_dir):
    doomed = doomed_worker(AFTER_CHILD_FINISHED, tmp_path, worker_log_dir)
    try:
        parent = start("test-parent", tmp_path, "parent-of-a-killed-child")
        died_at(doomed, AFTER_CHILD_FINISHED, tmp_path)
    finally:
        doomed.stop()
    child = Run.objects.get(parent_run=parent)
    assert child.status == RunStatus.SUCCEEDED  # its end is committed; its parent's wake was not sent

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "rescuer.log", name="rescuer"):
        parent = ended(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    assert parent.output["outputs"] == [{"doubled": 0}]


def test_cancelling_a_waiting_parent_cancels_its_children(on_worker, tmp_path):
    operator = user_with_roles("waits-worker-operator", "operator")
    parent = start("test-parent", tmp_path, "cancelled-parent", children=2, child_waits=True)
    children = Run.objects.filter(parent_run=parent)
    wait_for(lambda: parked(parent)() and children.filter(status=RunStatus.WAITING).count() == 2,
             what="the parent and both children to wait")
    report = services.cancel_run(run_id=parent.id, user=operator, source="api")
    assert report.run.status == RunStatus.CANCELLED
    assert sorted(children.values_list("status", flat=True)) == [RunStatus.CANCELLED] * 2
    for child in children:
        assert str(child.id) in report.summary()
        with pytest.raises(Conflict, match="ended"):
            send_event(run_id=child.id, name="go", sender="test")
    two_sweeps_later()  # nothing woke them meanwhile, whatever message was still about
    assert sorted(Run.objects.filter(id__in=[parent.id, *children.values_list("id", flat=True)])
                  .values_list("status", flat=True)) == [RunStatus.CANCELLED] * 3
