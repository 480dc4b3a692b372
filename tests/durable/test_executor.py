"""The executor advances runs in this process here; test_worker.py does it in real workers."""
from datetime import timedelta

import pytest
from django.utils import timezone

from durable import executor, services
from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run
from tests.durable import workflows
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db


class SimulatedCrash(BaseException):
    """Escapes the executor like a SIGKILL would: nothing after it runs."""


def start(calls_file, **extra):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, **extra}, business_key="k")
    return run


def expire_lease(run):
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_run_advances_through_all_steps_in_one_task(calls_file):
    run = start(calls_file)
    outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert (outcome.steps, run.status, run.lease_owner) == (3, RunStatus.SUCCEEDED, None)
    assert list(run.checkpoints.values_list("seq", "step", "next_step")) == [
        (0, "", "s1"), (1, "s1", "s2"), (2, "s2", "s3"), (3, "s3", "")]
    assert run.output["values"] == ["a1-result", "a2-result", "a3-result", "a4-result"]
    assert calls_in(calls_file) == ["a1", "a2", "a3", "a4"]


def test_start_records_the_replay_contract_on_the_run(calls_file):
    run = start(calls_file)
    assert (run.workflow_version, run.checkpoint_schema_version, run.prompt_release) == (1, 1, "p1")
    assert run.topology_fingerprint == workflows.counting.fingerprint


def test_crash_mid_step_resumes_from_checkpoint_without_calling_recorded_activities(calls_file, monkeypatch):
    run = start(calls_file)
    real = workflows.record_call

    def crash_on_a4(path, name):
        if name == "a4":
            raise SimulatedCrash()
        return real(path, name)

    monkeypatch.setattr(workflows, "record_call", crash_on_a4)
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    monkeypatch.setattr(workflows, "record_call", real)
    run.refresh_from_db()
    assert (run.status, run.checkpoint_seq, run.current_step) == (RunStatus.RUNNING, 2, "s3")
    assert executor.advance(run.id).claimed is False  # the dead worker's lease still holds
    expire_lease(run)
    assert executor.advance(run.id).steps == 1
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert calls_in(calls_file) == ["a1", "a2", "a3", "a4"]  # a3 was replayed, not called again
    assert JournalEntry.objects.filter(run=run, kind="activity").count() == 4


def test_a_changed_call_order_blocks_the_run_with_a_replay_violation(calls_file):
    run = start(calls_file)
    JournalEntry.objects.create(run=run, kind="activity", step="s1", call_index=0, name="something-else",
                                result="x", created_at=timezone.now())
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.BLOCKED_VERSION
    assert run.error["kind"] == "replay_violation"
    assert "history recorded 'something-else'" in run.error["message"]
    assert calls_in(calls_file) == []


def test_retryable_error_waits_with_backoff_then_succeeds(calls_file):
    run = start(calls_file, fail_times=1)
    outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING_RETRY and run.attempt == 1
    assert 0.04 <= outcome.retry_in <= 0.06
    assert run.error["kind"] == "transient" and run.error["retryable"] is True
    assert executor.advance(run.id).claimed is False  # not due yet
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert calls_in(calls_file) == ["a1", "a2", "fail-1", "a3", "a4"]  # a2 recorded once, reused on retry
    assert JournalEntry.objects.filter(run=run, kind="retry_scheduled").count() == 1


def test_exhausted_retries_fail_the_run_with_the_classified_error(calls_file):
    run = start(calls_file, fail_times=5)
    for _ in range(3):
        executor.advance(run.id)
        Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error["exhausted"] is True and run.error["attempt"] == 3 and run.error["kind"] == "transient"


def test_non_retryable_error_fails_at_once(calls_file):
    run = start(calls_file, fail_times=1, fail_kind="final")
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert (run.error["retryable"], run.error["kind"], run.error["step"]) == (False, "invalid_request", "s2")
    assert run.finished_at is not None


def test_a_worker_that_lost_its_lease_cannot_write(calls_file, monkeypatch):
    run = start(calls_file)
    real = workflows.record_call

    def another_worker_takes_over(path, name):
        if name == "a2":  # this worker paused; its lease expired and another worker claimed it
            Run.objects.filter(id=run.id).update(fencing_token=999, lease_owner="other")
        return real(path, name)

    monkeypatch.setattr(workflows, "record_call", another_worker_takes_over)
    outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert outcome.claimed and run.checkpoint_seq == 1
    assert not JournalEntry.objects.filter(run=run, name="a2").exists()  # the stale result was not recorded
    assert Checkpoint.objects.filter(run=run).count() == 2


def test_cancelling_a_running_run_stops_its_worker_at_the_next_write(calls_file, monkeypatch):
    run = start(calls_file)
    real = workflows.record_call

    def cancelled_meanwhile(path, name):
        if name == "a2":
            services.cancel_run(run_id=run.id, user=None, source="test")
        return real(path, name)

    monkeypatch.setattr(workflows, "record_call", cancelled_meanwhile)
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.checkpoint_seq == 1


def test_time_slice_end_releases_the_lease_and_asks_to_be_requeued(settings):
    settings.DURABLE_TIME_SLICE_SECONDS = 0
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert (outcome.steps, outcome.requeue, run.status, run.lease_owner) == (1, True, RunStatus.PENDING, None)


def test_an_unknown_version_blocks_the_run_instead_of_running_other_code(calls_file):
    run = start(calls_file)
    Run.objects.filter(id=run.id).update(workflow_version=7)
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.BLOCKED_VERSION and run.error["kind"] == "version_missing"
    assert calls_in(calls_file) == []


def test_a_changed_topology_blocks_the_run(calls_file):
    run = start(calls_file)
    Run.objects.filter(id=run.id).update(topology_fingerprint="0" * 32)
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.BLOCKED_VERSION and run.error["kind"] == "topology_changed"


def test_plain_steps_commit_once_each(django_assert_max_num_queries, settings):
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    executor.advance(run.id)
    # claim (update + read) + resume point + per step: 1 journal read + 1 write (2 statements on SQLite)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.checkpoint_seq == 10
