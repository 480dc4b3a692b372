"""A step renews the lease only when less than half of it is left; the fencing token still guards
every write. The lease's clock is driven explicitly (Lease.renewed_at), never waited for."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from durable import services
from durable.engine.errors import LeaseLost
from durable.models import Run
from durable.store import store

LEASE = 60.0


def claimed(owner: str = "w1"):
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    lease, _ = db.claim(run.id, owner, LEASE)
    return db, lease


def run_of(lease) -> Run:
    return Run.objects.get(id=lease.run_id)


def spend(lease, seconds: float) -> None:
    """As if this worker had last renewed the lease `seconds` ago."""
    lease.renewed_at -= seconds


@pytest.mark.django_db
def test_a_step_with_more_than_half_its_lease_left_changes_neither_the_expiry_nor_updated_at():
    db, lease = claimed()
    before = run_of(lease)
    spend(lease, LEASE / 2 - 5)

    db.commit_step(lease, "step1", "step2", {"n": 1}, 1)

    after = run_of(lease)
    assert after.checkpoint_seq == 1 and after.current_step == "step2"
    assert (after.lease_expires_at, after.updated_at) == (before.lease_expires_at, before.updated_at)


def within_a_step(db, lease) -> list:
    """The writes a step makes before its checkpoint: an activity's result, a reuse, a ledger row and its move."""
    fields = {"operation_id": "op-1", "run_id": lease.run_id, "step": "step1", "action_name": "refund",
              "downstream": "payments", "business_key": "t", "request_hash": "h", "payload": {"amount": 1},
              "status": "PENDING", "created_at": timezone.now(), "updated_at": timezone.now()}
    return [
        lambda: db.record_activity(lease, "step1", 0, "llm", {"text": "plan"}),
        lambda: db.record_reuse(lease, "step1", [{"call_index": 0, "name": "llm"}]),
        lambda: db.move_operation(lease, db.prepare_operation(lease, fields)[0], frozenset({"PENDING"}), "STARTED",
                                  journal={"to": "STARTED"}),
    ]


@pytest.mark.django_db
def test_writes_within_a_step_prove_the_lease_without_renewing_it_while_more_than_half_is_left():
    db, lease = claimed()
    before = run_of(lease)
    spend(lease, LEASE / 2 - 5)

    for write in within_a_step(db, lease):
        write()

    after = run_of(lease)
    assert (after.lease_expires_at, after.updated_at) == (before.lease_expires_at, before.updated_at)
    assert after.journal.count() == 3  # the activity, the reuse, the move


@pytest.mark.django_db
def test_writes_within_a_step_renew_a_lease_less_than_half_left_and_refuse_a_stale_token():
    db, lease = claimed()
    spend(lease, LEASE / 2 + 5)
    db.record_activity(lease, "step1", 0, "llm", {"text": "plan"})
    assert run_of(lease).lease_expires_at >= timezone.now() + timedelta(seconds=LEASE - 5)

    steal(lease)
    for write in within_a_step(db, lease)[1:]:
        with pytest.raises(LeaseLost):
            write()


@pytest.mark.django_db
def test_a_step_with_less_than_half_its_lease_left_renews_it_for_a_whole_lease():
    db, lease = claimed()
    before = run_of(lease).lease_expires_at
    spend(lease, LEASE / 2 + 5)

    db.commit_step(lease, "step1", "step2", {"n": 1}, 1)

    renewed = run_of(lease).lease_expires_at
    assert renewed > before and renewed >= timezone.now() + timedelta(seconds=LEASE - 5)
    assert lease.seconds_left() > LEASE - 5  # the worker knows it holds a whole lease again


@pytest.mark.django_db
def test_a_step_renews_a_lease_with_less_left_than_the_next_call_needs_though_more_than_half():
    db, lease = claimed()
    lease.keep_left = LEASE * 0.75  # what the worker's next call needs (durable/runtime/heartbeat.py sets it)
    spend(lease, LEASE / 2 - 5)

    db.commit_step(lease, "step1", "step2", {"n": 1}, 1)

    assert lease.seconds_left() > LEASE - 5  # renewed by the step's write: the call need not renew on its own


def steal(lease, owner: str = "w2"):
    """The old worker's lease runs out (it paused past it) and another worker claims the run."""
    spend(lease, LEASE + 1)
    Run.objects.filter(id=lease.run_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    thief, _ = store().claim(lease.run_id, owner, LEASE)
    assert thief.token == lease.token + 1
    return thief


@pytest.mark.django_db
def test_a_lease_renewed_late_is_still_fenced():
    db, lease = claimed()
    db.commit_step(lease, "step1", "step2", {"n": 1}, 1)  # more than half left: not renewed
    thief = steal(lease)

    with pytest.raises(LeaseLost):  # its renewal is due now, but its token no longer holds
        db.commit_step(lease, "step2", "step3", {"n": 2}, 1)

    run = run_of(lease)
    assert run.checkpoint_seq == 1 and run.checkpoints.count() == 2
    assert (run.lease_owner, run.fencing_token) == ("w2", thief.token)


@pytest.mark.django_db
def test_a_stolen_run_is_never_written_by_its_old_worker():
    db, lease = claimed()
    thief = steal(lease)
    old_writes = [
        lambda: db.commit_step(lease, "step1", "step2", {"n": 1}, 1),
        lambda: db.finish(lease, "step1", {"n": 1}, 1, {"n": 1}),
        lambda: db.record_activity(lease, "step1", 0, "llm", {"text": "late"}),
        lambda: db.renew(lease),
        lambda: db.release(lease),
    ]
    for write in old_writes:
        with pytest.raises(LeaseLost):
            write()
    run = run_of(lease)
    assert run.checkpoints.count() == 1 and run.journal.count() == 0 and run.lease_owner == "w2"

    db.commit_step(thief, "step1", "step2", {"n": 1}, 1)  # the new holder goes on
    assert run_of(lease).checkpoint_seq == 1


@pytest.mark.django_db
def test_step_and_in_step_writes_set_no_indexed_column_but_the_expiry_they_may_renew_on_postgres():
    """What makes it a heap-only (HOT) update wherever its page has room (migration 0011's fillfactor);
    the benchmark reports the share of HOT updates it got."""
    if connection.vendor != "postgresql":
        pytest.skip("heap-only tuple updates are Postgres'")
    from durable.store.postgres import _FENCE, _STEP_SQL

    with connection.cursor() as cursor:
        cursor.execute("""SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid
                           WHERE i.indrelid = 'durable_run'::regclass AND (a.attnum = ANY(i.indkey)
                              OR pg_get_expr(i.indpred, i.indrelid) ~ ('\\m' || a.attname || '\\M'))""")
        indexed = {name for (name,) in cursor.fetchall()}
    assert {"status", "updated_at", "lease_expires_at"} <= indexed  # the query sees predicates and keys
    for statement in (_STEP_SQL, _FENCE):  # a step's write; an activity's result or a ledger move
        set_clause = re.search(r"SET (.*?)\s+WHERE", statement, re.S).group(1)
        written = set(re.findall(r"(\w+) = ", set_clause))
        assert written & indexed == {"lease_expires_at"}  # kept as it is unless renewed: COALESCE(new, old)


@pytest.mark.django_db
def test_the_heartbeat_renews_every_lease_due_and_finds_every_lease_lost_in_one_statement():
    from django.test.utils import CaptureQueriesContext

    (db, due), (_, watched), (_, taken) = claimed(), claimed(), claimed()
    Run.objects.filter(id__in=[due.run_id, watched.run_id]).update(lease_expires_at=None)
    Run.objects.filter(id=taken.run_id).update(fencing_token=taken.token + 1)  # another worker claimed it since
    with CaptureQueriesContext(connection) as statements:
        held = db.renew_many([(due, True), (watched, False), (taken, True)])
    assert held == [True, True, False]
    if connection.vendor == "postgresql":
        assert len(statements) == 1  # one statement for the process's leases, however many
    assert run_of(due).lease_expires_at is not None  # renewed
    assert run_of(watched).lease_expires_at is None  # only looked at: not due
    assert run_of(taken).lease_expires_at is not None and run_of(taken).fencing_token == taken.token + 1  # untouched
