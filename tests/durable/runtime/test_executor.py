"""The executor advances runs in this process here; test_worker.py does it in real workers."""
from datetime import timedelta

import pytest
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.runtime import executor
from tests.durable import workflows
from tests.durable.claims import advance
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
    # Not due yet: pushed an hour on, so a loaded machine's pause after the 50 ms backoff cannot make it due.
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() + timedelta(hours=1))
    assert executor.advance(run.id).claimed is False
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert calls_in(calls_file) == ["a1", "a2", "fail-1", "a3", "a4"]  # a2 recorded once, reused on retry
    assert JournalEntry.objects.filter(run=run, kind="retry_scheduled").count() == 1


def test_a_run_that_succeeds_after_a_retry_has_no_error_and_its_timeline_keeps_the_retrys(calls_file):
    run = start(calls_file, fail_times=1)
    executor.advance(run.id)
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.error is None
    [retry] = JournalEntry.objects.filter(run=run, kind="retry_scheduled")
    assert retry.detail["error"]["kind"] == "transient"


def test_a_cancelled_run_has_no_error_and_its_timeline_keeps_the_retrys(calls_file):
    run = start(calls_file, fail_times=1)
    executor.advance(run.id)
    services.cancel_run(run_id=run.id, user=None, source="test")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and run.error is None
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


# Values the database cannot store (durable.engine.json_values), put where workflow code puts them. These
# tests commit for real (transaction=True): on Postgres a step's write goes out in flight while the next step
# runs, as in production, so a refused value would surface there if anything sent it.

POISONS = ["nul", "surrogate", "nan"]
unstorable_db = pytest.mark.django_db(transaction=True)


@pytest.fixture
def writes_in_flight(monkeypatch):
    """How many step writes went out in flight (Postgres); the real send, counted."""
    from django.db import connection

    from durable.store import batched, in_flight

    sent, real, handed = [], in_flight.send, batched.hand
    monkeypatch.setattr(in_flight, "send", lambda *args, **kwargs: (sent.append(1), real(*args, **kwargs))[1])
    monkeypatch.setattr(batched, "hand", lambda write: (sent.append(1), handed(write))[1])  # the other way out
    return lambda: len(sent) if connection.vendor == "postgresql" else None


@pytest.fixture
def probe():
    from tests.durable.ledger_workflows import probe

    probe.reset()
    yield probe
    probe.reset()


def start_poisoned(poison="nul", where="state"):
    run, _ = services.start_run(workflow="test-unstorable", input={"poison": poison, "where": where}, business_key="p")
    return run


def assert_failed_for_good_at_poison(run, kind):
    assert run.status == RunStatus.FAILED, run.error
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == (kind, False, "poison")
    assert run.checkpoint_seq == 1 and run.checkpoints.order_by("-seq").first().step == "prepare"
    assert executor.advance(run.id).claimed is False  # failed for good: nothing resumes it into the same error
    run.refresh_from_db()
    assert (run.status, run.checkpoint_seq) == (RunStatus.FAILED, 1)


@unstorable_db
@pytest.mark.parametrize("poison", POISONS)
def test_a_state_the_database_cannot_store_fails_the_run_for_good_at_its_step(poison, writes_in_flight):
    run = advance(start_poisoned(poison, "state"))
    assert_failed_for_good_at_poison(run, "state_not_storable")
    field, problem = ("number", "finite numbers only") if poison == "nan" else (
        "text", "NUL" if poison == "nul" else "lone surrogate")
    assert run.error["message"].startswith(f"state after step 'poison' cannot be stored: field {field} must ")
    assert problem in run.error["message"]
    assert writes_in_flight() in (None, 1)  # prepare's checkpoint went in flight; the refused one was never sent


@unstorable_db
@pytest.mark.parametrize("poison", POISONS)
def test_an_output_the_database_cannot_store_fails_the_run_at_its_last_step(poison):
    run = advance(start_poisoned(poison, "output"))
    assert run.status == RunStatus.FAILED and run.output is None
    assert (run.error["kind"], run.error["step"], run.checkpoint_seq) == ("state_not_storable", "conclude", 2)
    assert run.error["message"].startswith("output built after step 'conclude' cannot be stored: field value must ")


TEXT_POISONS = ["nul", "surrogate"]  # a name or a key is text: NaN cannot be in it


@unstorable_db
@pytest.mark.parametrize("where, poison", [("activity", p) for p in POISONS] + [("activity_name", p) for p in TEXT_POISONS])
def test_an_activity_result_the_database_cannot_store_fails_the_run_and_is_not_recorded(poison, where):
    run = advance(start_poisoned(poison, where))
    assert_failed_for_good_at_poison(run, "result_not_storable")
    what = "the result of activity 'llm.answer'" if where == "activity" else "the name of activity 'tool:"
    assert run.error["message"].startswith(what)
    assert not JournalEntry.objects.filter(run=run, kind="activity").exists()


@unstorable_db
@pytest.mark.parametrize("where, poison", [("payload", p) for p in POISONS] + [("business_key", p) for p in TEXT_POISONS])
def test_a_side_effect_request_the_database_cannot_store_is_refused_before_prepare(where, poison, probe):
    run = advance(start_poisoned(poison, where))
    assert_failed_for_good_at_poison(run, "payload_not_storable")
    assert run.error["message"].startswith(f"the {where.replace('_', ' ')} of side effect 'charge' cannot be stored")
    assert not SideEffect.objects.filter(run=run).exists() and probe.calls == []  # nothing prepared, nothing sent


@unstorable_db
@pytest.mark.parametrize("poison", TEXT_POISONS)
def test_an_error_whose_text_cannot_be_stored_is_recorded_repaired_through_retry_and_failure(poison):
    run = advance(start_poisoned(poison, "retryable_error"))
    repaired = "before\ufffdafter" if poison == "nul" else "an LLM wrote \ufffd here"
    assert run.status == RunStatus.WAITING_RETRY
    assert run.error["message"] == f"the downstream answered {repaired}"
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
    run = advance(run)
    assert (run.status, run.error["exhausted"], run.error["message"]) == (
        RunStatus.FAILED, True, f"the downstream answered {repaired}")
    [retry] = JournalEntry.objects.filter(run=run, kind="retry_scheduled")
    assert retry.detail["error"]["message"] == f"the downstream answered {repaired}"


@unstorable_db
@pytest.mark.parametrize("poison", TEXT_POISONS)
def test_a_bug_whose_message_cannot_be_stored_fails_the_run_with_the_message_repaired(poison):
    run = advance(start_poisoned(poison, "bug"))
    assert (run.status, run.error["kind"]) == (RunStatus.FAILED, "code_error")
    assert "\ufffd" in run.error["message"] and "\x00" not in run.error["message"]
    assert JournalEntry.objects.get(run=run, kind="failed").detail["error"] == run.error
