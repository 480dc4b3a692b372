"""The sweeper: the database, not the broker, says which runs must be sent to a worker again."""
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from durable import services, tasks
from durable.engine.states import TERMINAL, RunStatus
from durable.models import Run, SweepTurn
from durable.runtime import dispatch, sweeper
from durable.runtime.worker import PRUNE_TASK, worker_period

pytestmark = pytest.mark.django_db

GRACE = 10


@pytest.fixture(autouse=True)
def grace(settings):
    settings.DURABLE_PENDING_GRACE_SECONDS = GRACE



def ago(seconds):
    return timezone.now() - timedelta(seconds=seconds)


def run_in(status, *, last_sent=GRACE * 3, **fields):
    """A run in `status` that was last sent `last_sent` seconds ago (None: never)."""
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="k")
    enqueued_at = None if last_sent is None else ago(last_sent)
    Run.objects.filter(id=run.id).update(status=status, enqueued_at=enqueued_at, **fields)
    return run


def test_a_running_run_whose_lease_expired_is_sent_again(sent):
    run = run_in(RunStatus.RUNNING, lease_owner="dead-worker", lease_expires_at=ago(1))
    assert sweeper.sweep() == [run.id]
    assert sent == [run.id]


def test_a_dead_workers_run_sent_moments_before_its_lease_began_running_out_is_sent_again_at_once(sent):
    # Its last copy went to the worker that died: the grace period between copies does not hold it back.
    run = run_in(RunStatus.RUNNING, last_sent=3, lease_owner="dead-worker", lease_expires_at=ago(1))
    assert sweeper.sweep() == [run.id]
    assert sweeper.sweep() == []  # now sent since its lease ran out: the grace period applies again


def test_one_sweep_turn_per_period_across_workers_and_one_per_tool_scope(settings):
    assert sweeper.take_turn("host:1", 60)  # the first turn ever makes the row
    assert not sweeper.take_turn("host:2", 60)  # within the period: the other worker sweeps nothing
    settings.DURABLE_SCOPE_CREATED_BY = 7
    assert sweeper.turn_scope() == "created_by:7"
    assert sweeper.take_turn("bench:3", 60)  # a tool's workers take turns of their own, never production's
    del settings.DURABLE_SCOPE_CREATED_BY
    SweepTurn.objects.filter(scope="production").update(due_at=ago(1))
    assert sweeper.take_turn("host:2", 60)  # the period over: the next worker to look sweeps
    assert SweepTurn.objects.get(scope="production").taken_by == "host:2"


def test_a_running_run_with_a_live_lease_is_left_alone(sent):
    run_in(RunStatus.RUNNING, lease_owner="busy-worker", lease_expires_at=ago(-60), updated_at=ago(GRACE * 3))
    assert sweeper.sweep() == []
    assert sent == []


def test_a_waiting_retry_whose_time_has_come_is_sent_again(sent):
    run = run_in(RunStatus.WAITING_RETRY, next_attempt_at=ago(0))
    assert sweeper.sweep() == [run.id]
    assert sent == [run.id]


def test_a_waiting_retry_not_yet_due_is_left_alone(sent):
    run_in(RunStatus.WAITING_RETRY, next_attempt_at=ago(-30), updated_at=ago(GRACE * 3))
    assert sweeper.sweep() == []
    assert sent == []


def test_a_pending_run_older_than_the_grace_period_is_sent_again_because_its_message_was_lost(sent):
    run = run_in(RunStatus.PENDING, updated_at=ago(GRACE + 1))
    assert sweeper.sweep() == [run.id]
    assert sent == [run.id]


def test_a_fresh_pending_run_is_left_alone(sent):
    services.start_run(workflow="test-trivial", input={}, business_key="k")  # its message is on its way
    run_in(RunStatus.PENDING, updated_at=ago(GRACE - 2), last_sent=None)
    assert sweeper.sweep() == []
    assert sent == []


def test_the_grace_period_comes_from_settings(settings, sent):
    run = run_in(RunStatus.PENDING, updated_at=ago(5), last_sent=5)
    assert sweeper.sweep() == []
    settings.DURABLE_PENDING_GRACE_SECONDS = 2
    assert sweeper.sweep() == [run.id]


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_ended_runs_are_never_sent_again(status, sent):
    run_in(status, lease_expires_at=ago(60), next_attempt_at=ago(60), updated_at=ago(GRACE * 3))
    assert sweeper.sweep() == []
    assert sent == []


@pytest.mark.parametrize("status", [RunStatus.WAITING_APPROVAL, RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION])
def test_runs_waiting_for_a_human_are_not_sent_to_workers(status, sent):
    run_in(status, lease_expires_at=ago(60), next_attempt_at=ago(60), updated_at=ago(GRACE * 3))
    assert sweeper.sweep() == []
    assert sent == []


def test_a_run_sent_once_is_not_sent_again_within_the_grace_period(sent):
    run = run_in(RunStatus.RUNNING, lease_owner="dead-worker", lease_expires_at=ago(1), last_sent=None)
    assert sweeper.sweep() == [run.id]
    run.refresh_from_db()
    assert run.enqueued_at is not None and timezone.now() - run.enqueued_at < timedelta(seconds=5)
    assert sweeper.sweep() == []
    assert sent == [run.id]
    Run.objects.filter(id=run.id).update(enqueued_at=ago(GRACE + 1))  # still not picked up a grace period later
    assert sweeper.sweep() == [run.id]
    assert sent == [run.id, run.id]


def test_a_due_run_just_sent_by_someone_else_is_not_sent_again(sent):
    run_in(RunStatus.WAITING_RETRY, next_attempt_at=ago(1), last_sent=1)
    assert sweeper.sweep() == []


def test_sweep_sends_at_most_limit_runs_oldest_first(sent):
    old = run_in(RunStatus.PENDING, updated_at=ago(GRACE * 5))
    newer = run_in(RunStatus.PENDING, updated_at=ago(GRACE * 2))
    assert sweeper.sweep(limit=1) == [old.id]
    assert sweeper.sweep(limit=1) == [newer.id]
    assert sent == [old.id, newer.id]


def test_durable_sweep_command_sweeps_once_and_says_how_many(sent):
    expired = run_in(RunStatus.RUNNING, lease_owner="dead-worker", lease_expires_at=ago(1))
    due = run_in(RunStatus.WAITING_RETRY, next_attempt_at=ago(1))
    run_in(RunStatus.SUCCEEDED, updated_at=ago(GRACE * 3))
    out = StringIO()
    call_command("durable_sweep", stdout=out)
    assert out.getvalue().strip() == ("started 0 scheduled run(s), reconciled 0 stale operation(s), "
                                      "expired 0 approval(s), deleted 0 stream chunk(s) past retention, "
                                      "re-enqueued 2 run(s), "
                                      "sent 0 notification(s) to the workers")
    assert sorted(sent, key=str) == sorted([expired.id, due.id], key=str)
    out = StringIO()
    call_command("durable_sweep", stdout=out)
    assert out.getvalue().strip() == ("started 0 scheduled run(s), reconciled 0 stale operation(s), "
                                      "expired 0 approval(s), deleted 0 stream chunk(s) past retention, "
                                      "re-enqueued 0 run(s), "
                                      "sent 0 notification(s) to the workers")


def test_a_run_stuck_in_a_backlog_is_sent_again_with_ever_longer_gaps(sent):
    """Waiting 100 s, last sent 30 s ago: a lost message would be re-sent every grace period,
    but the next copy waits until it has waited twice as long as when the last one went."""
    run = run_in(RunStatus.PENDING, updated_at=ago(100), last_sent=30)
    assert sweeper.sweep() == []
    Run.objects.filter(id=run.id).update(enqueued_at=ago(55))
    assert sweeper.sweep() == [run.id]
    assert sent == [run.id]


def test_a_workers_period_sweeps_on_its_turn_and_sends_the_days_retention_pass_once(settings, sent, monkeypatch):
    """What each worker's thread does every DURABLE_SWEEP_SECONDS (durable/runtime/worker.py), with no beat."""
    settings.DURABLE_RETENTION_DAYS = 30
    tasks_sent = []
    monkeypatch.setattr(dispatch, "send_by_name", tasks_sent.append)
    dead = run_in(RunStatus.RUNNING, lease_owner="dead-worker", lease_expires_at=ago(1))
    sent.clear()
    worker_period(time.monotonic())
    assert sent == [dead.id]  # the dead worker's run, re-sent by a worker's sweep: no beat
    assert tasks_sent == [PRUNE_TASK] == [tasks.prune.name]  # the day's retention pass, as beat would send it
    assert set(SweepTurn.objects.values_list("scope", flat=True)) == {"production", "retention"}
    Run.objects.filter(id=dead.id).update(enqueued_at=None)
    worker_period(time.monotonic())  # within the period, and the day: both turns are taken
    assert sent == [dead.id] and tasks_sent == [PRUNE_TASK]
