"""Real Celery worker processes: runs complete, survive SIGKILL, and shrug off duplicate messages."""
from __future__ import annotations

from collections import Counter

import pytest
from rest_framework.test import APIClient

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Process, Run
from durable.runtime import dispatch
from durable.tools.processes import WorkerProcess
from tests.conftest import ALL_RUN_PERMS, make_user
from tests.durable.workflows import calls_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_claims_run_started_through_the_api_completes_on_a_worker(session_worker, sandbox):
    client = APIClient()  # v1 has no approval step: starting it is an explicit, audited permission
    client.force_authenticate(make_user("v1-starter", *ALL_RUN_PERMS, "durable.start_older_version"))
    response = client.post("/api/runs/", {
        "workflow": "claims-agent", "version": 1, "business_key": "ORD-1001", "reason": "worker test",
        "input": {"order_id": "ORD-1001", "customer_message": "ORD-1001 arrived broken, refund please"},
    }, format="json")
    assert response.status_code == 201, response.data
    run_id = response.data["id"]
    wait_for(lambda: status_of(run_id) == RunStatus.SUCCEEDED, what="the claims run to succeed")
    run = Run.objects.get(id=run_id)
    assert run.output["proposed_refund"]["amount"] == "120.00"
    assert run.lease_owner is None and run.checkpoint_seq == 6  # planner, lookup, propose_refund, payment, ticket, notify
    assert sandbox.state.calls_snapshot()["orders"]["calls"] == 1


def test_a_retryable_failure_is_retried_by_the_worker_after_its_backoff(session_worker, calls_file):
    run, _ = services.start_run(workflow="test-counting", business_key="r",
                                input={"calls_file": calls_file, "fail_times": 2})
    wait_for(lambda run=run: status_of(run.id) == RunStatus.SUCCEEDED, what="the run to succeed after two retries")
    assert calls_in(calls_file) == ["a1", "a2", "fail-1", "fail-2", "a3", "a4"]
    assert JournalEntry.objects.filter(run=run, kind="retry_scheduled").count() == 2


def test_sigkill_mid_step_resumes_from_the_last_checkpoint_without_repeating_activities(
        own_queue, calls_file, tmp_path, worker_log_dir):
    hold = tmp_path / "hold"
    hold.touch()  # step s2 waits after recording its activity while this file exists
    fast_lease = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1"}
    doomed = WorkerProcess(env=fast_lease, log_path=worker_log_dir / "doomed.log", name="doomed").start()
    try:
        run, _ = services.start_run(workflow="test-counting", business_key="crash",
                                    input={"calls_file": calls_file, "hold_file": str(hold)})
        wait_for(lambda: JournalEntry.objects.filter(run=run, name="a2").exists(), what="s2 to record a2")
        doomed.kill()
    finally:
        doomed.stop()
    run.refresh_from_db()
    assert (run.status, run.checkpoint_seq, run.current_step) == (RunStatus.RUNNING, 1, "s2")
    assert run.lease_owner is not None  # the dead worker still "holds" it until the lease expires
    hold.unlink()

    # A fresh worker with beat: nobody re-sends the run by hand; the sweeper finds the expired lease.
    with WorkerProcess(env=fast_lease, beat=True, log_path=worker_log_dir / "rescuer.log", name="rescuer"):
        wait_for(lambda run=run: status_of(run.id) == RunStatus.SUCCEEDED, what="the rescued run to succeed")

    run.refresh_from_db()
    assert calls_in(calls_file) == ["a1", "a2", "a3", "a4"]  # a2 was replayed from the journal, not called again
    assert list(run.checkpoints.values_list("seq", flat=True)) == [0, 1, 2, 3]
    tokens = dict(JournalEntry.objects.filter(run=run, kind="activity").values_list("name", "fencing_token"))
    assert tokens["a2"] < tokens["a3"]  # the rescuer wrote under a newer fencing token
    assert run.fencing_token >= 2


def test_a_run_of_a_killed_worker_is_resumed_by_another_worker_with_default_settings_and_no_beat(
        own_queue, calls_file, tmp_path, worker_log_dir):
    """Issue 28 item 9: the lease, the heartbeat and the sweeper inside every worker, as the docs start them."""
    hold = tmp_path / "hold"
    hold.touch()
    doomed = WorkerProcess(log_path=worker_log_dir / "default-doomed.log", name="default-doomed").start()
    try:
        run, _ = services.start_run(workflow="test-counting", business_key="killed",
                                    input={"calls_file": calls_file, "hold_file": str(hold)})
        wait_for(lambda: JournalEntry.objects.filter(run=run, name="a2").exists(), what="s2 to record a2")
        with WorkerProcess(log_path=worker_log_dir / "default-rescuer.log", name="default-rescuer"):
            doomed.kill()
            hold.unlink()
            # Liveness only, generously bounded: durable_bench --kill measures how soon (docs/benchmarks.md).
            wait_for(lambda run=run: status_of(run.id) == RunStatus.SUCCEEDED, timeout=60,
                     what="another worker to resume the killed worker's run")
    finally:
        doomed.stop()
    run.refresh_from_db()
    assert Counter(calls_in(calls_file)) == {"a1": 1, "a2": 1, "a3": 1, "a4": 1}  # nothing done twice
    assert list(run.checkpoints.values_list("seq", flat=True)) == [0, 1, 2, 3]
    tokens = dict(JournalEntry.objects.filter(run=run, kind="activity").values_list("name", "fencing_token"))
    assert tokens["a2"] < tokens["a3"]  # the rescuer wrote under a newer fencing token


def test_a_worker_records_itself_and_the_workflows_it_loaded(own_queue, worker_log_dir):
    with WorkerProcess(log_path=worker_log_dir / "recorded.log", name="recorded") as worker:
        wait_for(lambda: Process.objects.filter(pid=worker.pid).exists(), what="the worker's row")
        row = Process.objects.get(pid=worker.pid)
    assert row.kind == Process.Kind.WORKER
    assert "test-counting@1" in row.workflows


def test_duplicate_deliveries_to_two_workers_run_each_step_once(own_queue, tmp_path, worker_log_dir):
    runs = []
    for i in range(4):
        calls = str(tmp_path / f"calls-{i}.txt")
        run, _ = services.start_run(workflow="test-counting", business_key=f"dup-{i}", input={"calls_file": calls})
        runs.append((run, calls))
    for run, _ in runs:
        for _ in range(5):  # every message delivered five times over
            dispatch.enqueue(run.id)
    with WorkerProcess(log_path=worker_log_dir / "dup-a.log", name="dup-a"), \
            WorkerProcess(log_path=worker_log_dir / "dup-b.log", name="dup-b"):
        for run, _ in runs:
            wait_for(lambda run=run: status_of(run.id) == RunStatus.SUCCEEDED, what=f"run {run.id} to succeed")
    for run, calls in runs:
        assert Counter(calls_in(calls)) == {"a1": 1, "a2": 1, "a3": 1, "a4": 1}
        assert run.checkpoints.count() == 4


def test_workers_fail_loudly_when_the_broker_is_unreachable(own_queue, worker_log_dir):
    broken = WorkerProcess(env={"CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}, log_path=worker_log_dir / "broken.log")
    with pytest.raises(RuntimeError):
        broken.start(timeout=8)
    broken.stop()



def test_two_workers_with_every_message_delivered_twice_make_each_effect_and_checkpoint_once(
        own_queue, settings, sandbox, worker_log_dir):
    settings.DURABLE_DELIVER_TWICE = True
    twice = {"DURABLE_DELIVER_TWICE": "true"}
    orders = [f"ORD-{8100 + i}" for i in range(6)]
    for order_id in orders:
        sandbox.state.upsert_order({"order_id": order_id, "customer": "Drill", "amount": "30.00", "currency": "EUR",
                                    "status": "paid", "refunded_amount": "0.00"})
    with WorkerProcess(env=twice, log_path=worker_log_dir / "twice-a.log", name="twice-a"), \
            WorkerProcess(env=twice, log_path=worker_log_dir / "twice-b.log", name="twice-b"):
        runs = [services.start_run(workflow="claims-agent", version=1, business_key=order_id, input={
            "order_id": order_id, "customer_message": f"Refund {order_id} please, it broke"}, allow_older_version=True)[0] for order_id in orders]
        for run in runs:
            wait_for(lambda run=run: status_of(run.id) == RunStatus.SUCCEEDED, what=f"run {run.id} to succeed")
    counts = sandbox.state.calls_snapshot()
    for run in runs:
        operations = list(run.side_effects.values_list("operation_id", "downstream"))
        assert len(operations) == 3
        for operation_id, downstream in operations:
            assert counts[downstream]["effects_by_key"][operation_id] == 1
        steps = list(run.checkpoints.values_list("step", flat=True))
        assert len(steps) == len(set(steps)) == 7  # each step's checkpoint written once
    assert sum(counts[s]["effects"] for s in ("payments", "tickets", "notifications")) == 3 * len(orders)
