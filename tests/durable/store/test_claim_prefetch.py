"""The claim returns the run's newest checkpoint and recorded activity results with its lease (on
Postgres in the claim's one statement); what it hands out is the newest, even when another
transaction wrote the run while the claim waited for its row lock. Real Postgres, no timing."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from durable import services
from durable.engine.errors import LeaseLost
from durable.models import Checkpoint, JournalEntry, Run
from durable.store import store
from tests.durable.store.test_store import statements_of

LEASE = 60.0


def started_run() -> Run:
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    return run


def expire(run_id) -> None:
    """The holder paused past its lease (set on the row, not waited for)."""
    Run.objects.filter(id=run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_a_claim_hands_out_the_newest_checkpoint_and_the_recorded_calls_without_another_read():
    run = started_run()
    db = store()
    first, _ = db.claim(run.id, "w1", LEASE)
    db.resume_point(first), db.recorded_calls(first, "step1")
    db.commit_step(first, "step1", "step2", {"n": 1}, 1)
    db.commit_step(first, "step2", "step3", {"n": 2}, 1)
    db.record_activity(first, "step3", 0, "llm.plan", {"intent": "refund"})
    db.record_activity(first, "step3", 1, "llm.check", "ok")
    db.release(first)

    lease, _ = db.claim(run.id, "w2", LEASE)
    handed: list = []
    reads = statements_of(lambda: handed.extend([db.resume_point(lease), db.recorded_calls(lease, "step3")]))
    fresh = [db.resume_point(lease), db.recorded_calls(lease, "step3")]  # handed out once: these read afresh

    if connection.vendor == "postgresql":
        assert reads == []  # both came with the claim
    for point, calls in (handed, fresh):
        assert (point.seq, point.next_step, point.state) == (2, "step3", {"n": 2})
        assert [(c.call_index, c.name, c.result) for c in calls] == [
            (0, "llm.plan", {"intent": "refund"}), (1, "llm.check", "ok")]


@pytest.mark.django_db
def test_a_run_taken_over_from_an_expired_lease_is_claimed_once_and_its_old_holder_cannot_write():
    run = started_run()
    db = store()
    old, _ = db.claim(run.id, "w1", LEASE)
    db.commit_step(old, "step1", "step2", {"n": 1}, 1)
    expire(run.id)

    new, _ = db.claim(run.id, "w2", LEASE)
    assert new.token == old.token + 1 and db.resume_point(new).seq == 1
    assert db.claim(run.id, "w3", LEASE) is None  # taken: the lease is new, nobody else gets it

    with pytest.raises(LeaseLost):
        db.commit_step(old, "step2", "step3", {"n": 2}, 1)
    assert Checkpoint.objects.filter(run_id=run.id).count() == 2  # the start's and step1's


def lock_waiters(run_id) -> int:
    """Backends waiting for a lock on durable_run while claiming this run (seen, not timed)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                       ["%FOR UPDATE%"])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_claim_that_waited_for_the_row_lock_hands_out_what_the_writer_committed_meanwhile():
    """The old holder's lease has expired but it still writes (a step and an activity, in one
    transaction) and holds the row lock; a claim that starts meanwhile waits, then takes the run: it must resume from that step
    and reuse that result, which its statement's snapshot, taken before the writer committed, lacks."""
    if connection.vendor != "postgresql":
        pytest.skip("the portable claim reads after its UPDATE committed")
    run = started_run()
    db = store()
    old, _ = db.claim(run.id, "w1", LEASE)
    expire(run.id)  # committed: the claim's snapshot sees the lease free; the old holder does not know yet
    locked, commit = threading.Event(), threading.Event()
    claimed: list = []

    def old_holder_writes() -> None:
        try:
            with transaction.atomic():
                store().commit_step(old, "step1", "step2", {"n": 1}, 1)
                JournalEntry.objects.create(run_id=run.id, kind=JournalEntry.Kind.ACTIVITY, step="step2",
                                            call_index=0, name="llm.plan", result={"intent": "refund"},
                                            fencing_token=old.token, created_at=timezone.now())
                locked.set()
                commit.wait()
        finally:
            connection.close()

    def claim() -> None:
        try:
            claimed.append(store().claim(run.id, "w2", LEASE))
        finally:
            connection.close()

    writer = threading.Thread(target=old_holder_writes)
    writer.start()
    locked.wait()
    claimer = threading.Thread(target=claim)
    claimer.start()
    while lock_waiters(run.id) == 0 and claimer.is_alive():
        threading.Event().wait(0.01)  # until the claim blocks on the writer's row lock
    commit.set()
    writer.join()
    claimer.join()

    lease, _ = claimed[0]
    assert lease.token == old.token + 1 and lease.seq == 1
    point = db.resume_point(lease)
    assert (point.seq, point.next_step, point.state) == (1, "step2", {"n": 1})
    # Written without a visit, as before visits existed: read as the newest visit of step2, this one.
    assert [(c.call_index, c.name) for c in db.recorded_calls(lease, "step2")] == [(0, "llm.plan")]


@pytest.mark.django_db
def test_a_claim_hands_out_only_the_records_of_the_visit_it_resumes():
    """An earlier visit of the same step (a loop) recorded its own calls: the visit resumed now gets only its
    own, and a result written before visits existed (visit NULL) counts as the newest visit's."""
    run = started_run()
    db = store()
    first, _ = db.claim(run.id, "w1", LEASE)
    db.record_activity(first, "step1", 0, "llm.plan", "first visit")
    db.commit_step(first, "step1", "step1", {"n": 1}, 1)  # the step routes back to itself: visit #2 starts at 1
    db.record_activity(first, "step1", 0, "llm.plan", "second visit")
    JournalEntry.objects.create(run_id=run.id, kind=JournalEntry.Kind.ACTIVITY, step="step1", call_index=1,
                                name="llm.check", result="unvisited", fencing_token=first.token,
                                created_at=timezone.now())
    db.release(first)

    lease, _ = db.claim(run.id, "w2", LEASE)
    assert db.resume_point(lease).seq == 1
    calls = db.recorded_calls(lease, "step1")
    assert [(c.call_index, c.result) for c in calls] == [(0, "second visit"), (1, "unvisited")]
    assert db.recorded_calls(lease, "step2") == []
