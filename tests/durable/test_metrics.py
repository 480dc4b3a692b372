"""Each metric moves exactly once where its event happens, read back from the shared multiprocess directory."""
from datetime import timedelta

import pytest
from django.utils import timezone

from durable import metrics, services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.registry import registry
from durable.runtime import executor
from durable.tools.faults import AFTER_COMMIT, AFTER_DOWNSTREAM, AFTER_STARTED
from reconciliation.services import resolve_operation
from reconciliation.sweeper import reconcile_stale
from tests.conftest import make_user
from tests.durable import version_workflows as vw
from tests.durable.claims import needs_attention, start_claim
from tests.durable.ledger_workflows import SimulatedCrash, crash_at, expire_lease, probe
from tests.durable.metered import counting
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db

COUNTING = {"workflow": "test-counting", "version": "1"}
VERSIONED = {"workflow": vw.NAME, "version": "1"}


def start(calls_file, **extra):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, **extra}, business_key="k")
    return run


def advance(run):
    executor.advance(run.id)
    run.refresh_from_db()
    return run


def retry_now(run, ago=timedelta(0)):
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - ago)
    return advance(run)


def crash(run, monkeypatch, point, action):
    crash_at(monkeypatch, point, action)
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    expire_lease(run)
    return run


@pytest.fixture(autouse=True)
def fresh_probe():
    probe.reset()
    yield probe
    probe.reset()


# Resumes


def test_a_first_claim_is_not_a_resume_and_a_due_retry_is_one(calls_file):
    run = start(calls_file, fail_times=1)
    with counting("workflow_resume_total", **COUNTING) as first:
        assert advance(run).status == RunStatus.WAITING_RETRY
    with counting("workflow_resume_total", **COUNTING) as resumed, \
            counting("resume_latency_seconds_count", **COUNTING) as timed:
        assert retry_now(run).status == RunStatus.SUCCEEDED
    assert (first.by, resumed.by, timed.by) == (0, 1, 1)


def test_a_run_released_at_the_end_of_its_time_slice_is_resumed_by_the_next_task(settings):
    settings.DURABLE_TIME_SLICE_SECONDS = 0  # one step per task
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    trivial = {"workflow": "test-trivial", "version": "1"}
    with counting("workflow_resume_total", **trivial) as resumed:
        for _ in range(10):
            executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and resumed.by == 9  # every task but the first


def test_resume_latency_is_measured_from_when_the_retry_became_due(calls_file):
    run = advance(start(calls_file, fail_times=1))
    with counting("resume_latency_seconds_sum", **COUNTING) as waited, \
            counting("resume_latency_seconds_bucket", le="10.0", **COUNTING) as within_10s, \
            counting("resume_latency_seconds_bucket", le="60.0", **COUNTING) as within_60s:
        retry_now(run, ago=timedelta(seconds=30))
    assert 30 <= waited.by < 40
    assert (within_10s.by, within_60s.by) == (0, 1)


def test_a_crashed_workers_run_waited_from_its_lease_expiry(calls_file, monkeypatch):
    run = start(calls_file)

    def die(*args):
        raise SimulatedCrash("the worker died holding the lease")

    monkeypatch.setattr(executor, "_run_steps", die)
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    monkeypatch.undo()
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=120))
    with counting("workflow_resume_total", **COUNTING) as resumed, \
            counting("resume_latency_seconds_sum", **COUNTING) as waited:
        assert advance(run).status == RunStatus.SUCCEEDED
    assert resumed.by == 1 and 120 <= waited.by < 130


# The replay contract and checkpoints


@pytest.fixture
def deploy(monkeypatch):
    def swap(workflow):
        monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    return swap


def start_v1():
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="b", allow_older_version=True)
    return run


def test_a_missing_version_is_a_version_mismatch_not_a_restore_failure(monkeypatch):
    run = start_v1()
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    with counting("workflow_version_mismatch_total", reason="version_missing", **VERSIONED) as mismatch, \
            counting("checkpoint_restore_failure_total", **VERSIONED) as restore:
        assert advance(run).status == RunStatus.BLOCKED_VERSION
    assert (mismatch.by, restore.by) == (1, 0)


def test_a_changed_topology_is_a_version_mismatch(deploy):
    run = start_v1()
    deploy(vw.build(1, ("a", "x", "b", "c")))
    with counting("workflow_version_mismatch_total", **VERSIONED) as mismatch:
        advance(run)
    assert mismatch.by == 1
    assert metrics.value("workflow_version_mismatch_total", reason="topology_changed", **VERSIONED) >= 1


def test_a_checkpoint_without_an_upcaster_is_a_restore_failure_and_blocks_the_run(deploy):
    run = start_v1()
    deploy(vw.build(1, checkpoint_schema_version=2))
    with counting("checkpoint_restore_failure_total", **VERSIONED) as restore, \
            counting("workflow_version_mismatch_total", reason="schema_unreadable", **VERSIONED) as mismatch:
        run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "schema_unreadable")
    assert (restore.by, mismatch.by) == (1, 1)


def test_a_checkpoint_whose_state_no_longer_validates_blocks_the_run_instead_of_crashing_the_task():
    run = start_v1()
    Checkpoint.objects.filter(run=run, seq=0).update(state={"order_id": "ORD-1", "done": "not a list"})
    with counting("checkpoint_restore_failure_total", **VERSIONED) as restore:
        run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "schema_unreadable")
    assert "cannot be read as StateV1" in run.error["message"] and run.lease_owner is None
    assert restore.by == 1


def test_a_changed_call_order_is_a_version_mismatch(calls_file):
    run = start(calls_file)
    JournalEntry.objects.create(run=run, kind="activity", step="s1", call_index=0, name="something-else",
                                result="x", created_at=timezone.now())
    with counting("workflow_version_mismatch_total", reason="replay_violation", **COUNTING) as mismatch:
        assert advance(run).status == RunStatus.BLOCKED_VERSION
    assert mismatch.by == 1


# Replay of recorded results


def test_a_retried_step_reuses_its_recorded_result_once_and_counts_as_one_replayed_step(calls_file):
    run = start(calls_file, fail_times=1)
    with counting("task_result_reused_total", **COUNTING) as live_reused, \
            counting("replayed_step_total", **COUNTING) as live_replayed:
        advance(run)  # s1 and s2's activity run live; s2 then fails
    with counting("task_result_reused_total", **COUNTING) as reused, \
            counting("replayed_step_total", **COUNTING) as replayed:
        retry_now(run)  # s2 again: a2 comes from the journal
    assert (live_reused.by, live_replayed.by) == (0, 0)
    assert (reused.by, replayed.by) == (1, 1)
    assert calls_in(calls_file).count("a2") == 1


def test_a_step_replaying_two_recorded_results_is_one_replayed_step(calls_file, settings):
    settings.DURABLE_TIME_SLICE_SECONDS = 0  # a task a step: the run resumes at s3, the visit the records are of
    run = advance(advance(start(calls_file)))  # s1, then s2
    assert run.current_step == "s3"
    for index, name in enumerate(("a3", "a4")):  # no visit: recorded before visits existed, this visit's
        JournalEntry.objects.create(run=run, kind="activity", step="s3", call_index=index, name=name,
                                    result=f"{name}-recorded", created_at=timezone.now())
    with counting("task_result_reused_total", **COUNTING) as reused, \
            counting("replayed_step_total", **COUNTING) as replayed:
        run = advance(run)
    assert run.output["values"][-2:] == ["a3-recorded", "a4-recorded"]
    assert (reused.by, replayed.by) == (2, 1)


# Retries and failures


def test_a_retryable_error_schedules_one_retry(calls_file):
    with counting("activity_retry_total", **COUNTING) as retries, \
            counting("retry_exhausted_total", **COUNTING) as exhausted:
        assert advance(start(calls_file, fail_times=1)).status == RunStatus.WAITING_RETRY
    assert (retries.by, exhausted.by) == (1, 0)


def test_retries_are_exhausted_once_on_the_last_allowed_attempt(calls_file):
    run = start(calls_file, fail_times=5)  # the policy allows 3 attempts
    with counting("activity_retry_total", **COUNTING) as retries, \
            counting("retry_exhausted_total", **COUNTING) as exhausted, \
            counting("non_retryable_failure_total", **COUNTING) as non_retryable:
        advance(run)
        retry_now(run)
        with counting("retry_exhausted_total", **COUNTING) as on_the_last:
            run = retry_now(run)
    assert run.status == RunStatus.FAILED and run.error["exhausted"] is True
    assert (retries.by, exhausted.by, on_the_last.by, non_retryable.by) == (2, 1, 1, 0)


def test_a_non_retryable_error_fails_once_without_a_retry(calls_file):
    with counting("non_retryable_failure_total", **COUNTING) as failed, \
            counting("activity_retry_total", **COUNTING) as retries:
        run = advance(start(calls_file, fail_times=1, fail_kind="invalid"))
    assert run.status == RunStatus.FAILED and (failed.by, retries.by) == (1, 0)


# Side effects


def start_probe():
    run, _ = services.start_run(workflow="test-ledger-probe", input={}, business_key="B-1")
    return run


def test_a_committed_side_effect_entered_again_is_a_duplicate_prevented(monkeypatch):
    run = crash(start_probe(), monkeypatch, AFTER_COMMIT, "charge")
    with counting("side_effect_duplicate_prevented_total", action="charge") as prevented:
        assert advance(run).status == RunStatus.SUCCEEDED
    assert prevented.by == 1 and len(probe.calls) == 1


def test_a_first_send_is_no_idempotency_key_hit(monkeypatch):
    with counting("idempotency_key_hit_total", action="charge") as hits:
        assert advance(start_probe()).status == RunStatus.SUCCEEDED
    assert hits.by == 0


def test_resending_a_started_operation_with_its_key_is_one_key_hit_and_one_reconciliation(monkeypatch):
    run = crash(start_probe(), monkeypatch, AFTER_STARTED, "charge")
    with counting("idempotency_key_hit_total", action="charge") as hits, \
            counting("reconciliation_total", action="charge", outcome="retry_same_key") as decided:
        assert advance(run).status == RunStatus.SUCCEEDED
    assert (hits.by, decided.by) == (1, 1)
    [(key, _, _)] = probe.calls
    assert key == SideEffect.objects.get(run=run).operation_id


def test_a_start_request_retried_with_its_idempotency_key_is_a_start_run_key_hit():
    start = {"workflow": "test-trivial", "input": {}, "business_key": "t", "idempotency_key": "req-1"}
    with counting("idempotency_key_hit_total", action=metrics.START_RUN) as first:
        services.start_run(**start)
    with counting("idempotency_key_hit_total", action=metrics.START_RUN) as again:
        _, created = services.start_run(**start)
    assert created is False and (first.by, again.by) == (0, 1)


def test_a_notification_whose_answer_was_lost_is_one_unknown_operation(demo):
    with counting("side_effect_unknown_total", action="notify") as unknown, \
            counting("side_effect_unknown_total", action="refund") as other:
        needs_attention(demo)
    assert (unknown.by, other.by) == (1, 0)


def test_the_sweeper_marking_a_stale_notification_unknown_counts_it_and_its_decision(demo, monkeypatch, settings):
    settings.DURABLE_RECONCILE_AFTER_SECONDS = 0
    crash(start_claim(), monkeypatch, AFTER_STARTED, "notify")
    with counting("side_effect_unknown_total", action="notify") as unknown, \
            counting("reconciliation_total", action="notify", outcome="unknown") as decided:
        assert reconcile_stale() == 1
        assert reconcile_stale() == 0  # nothing left to decide: counted once
    assert (unknown.by, decided.by) == (1, 1)


def test_a_ticket_found_by_lookup_is_one_found_reconciliation(demo, monkeypatch):
    run = crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, "ticket")
    with counting("reconciliation_total", action="ticket", outcome="found") as found, \
            counting("reconciliation_total", action="ticket") as any_outcome:
        assert advance(run).status == RunStatus.SUCCEEDED
    assert (found.by, any_outcome.by) == (1, 1)


def test_an_operator_resolution_is_one_reconciliation(demo):
    run, row = needs_attention(demo)
    resolver = make_user("resolver", "durable.resolve_sideeffect")
    with counting("reconciliation_total", action="notify", outcome="resolved_succeeded") as resolved:
        resolve_operation(operation_id=row.operation_id, user=resolver, source="test", outcome="succeeded",
                          external_ref="ntf-1", reason="the provider's outbox shows it")
    assert resolved.by == 1
    assert SideEffect.objects.get(operation_id=row.operation_id).status == Op.SUCCEEDED


def test_reconciliation_outcomes_are_a_fixed_set():
    with pytest.raises(ValueError, match="not one of"):
        metrics.reconciled("notify", "maybe")


# Every series of the registered workflows exists from the first scrape


def test_known_series_start_at_zero():
    metrics.declare_known_series()
    samples = {(s.name, tuple(sorted(s.labels.items())))
               for m in metrics.shared_registry().collect() for s in m.samples}
    assert ("retry_exhausted_total", (("version", "1"), ("workflow", "claims-agent"))) in samples
    assert ("side_effect_unknown_total", (("action", "notify"),)) in samples
    assert ("reconciliation_total", (("action", "refund"), ("outcome", "found"))) in samples
    assert ("idempotency_key_hit_total", (("action", "start_run"),)) in samples
