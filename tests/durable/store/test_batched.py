"""Writes batched by the process's writer (durable/store/batched.py), on real Postgres.

Each write in a batch is fenced on its own: a lost lease writes nothing of its run while the other runs' writes
commit, in one statement. A run's thread reads its write's outcome before its next write, call or query, as it
reads a write of its own in flight; an activity's result is written as it answers, not with the step.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, connection
from django.db.models import F
from django.utils import timezone

from durable.engine.errors import LeaseLost
from durable.models import Checkpoint, JournalEntry, Run
from durable.runtime.executor import advance
from durable.store import batched, store
from tests.durable.store.test_in_flight import called, clean_hooks, hooks, postgres_only, started, steal  # noqa: F401  its fixtures too
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the writer's connection must see what the test commits

LEASE = 60.0


@pytest.fixture(autouse=True)
def postgres_and_hooks(postgres_only, clean_hooks):
    """As test_in_flight.py's: Postgres only, each test's step hooks cleared."""


def claimed() -> tuple[Run, Any, Any]:
    run = started()
    db = store()
    lease, _ = db.claim(run.id, "w1", LEASE)
    return run, db, lease


def given_back() -> None:
    """The thread's connection back to the pool, as before a call: its next write goes to the writer."""
    connection.close()


def writes_handed(monkeypatch) -> list[batched.Write]:
    handed: list[batched.Write] = []
    real = batched.hand
    monkeypatch.setattr(batched, "hand", lambda write: (handed.append(write), real(write))[1])
    return handed


def step_write(lease: Any, state: str = '{"steps": ["first"]}') -> batched.Write:
    return batched.Write(lease.run_id, lease.token, lease.seq, "first", None, timezone.now(),
                         batched.Checkpoint("second", state, None, None, 1),
                         [batched.RecordedCall(0, "llm.plan", '"plan"')])


def elsewhere(query: Any) -> Any:
    """`query()` on another thread's connection: this thread's would read its own write's outcome first."""
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(query())
        finally:
            connection.close()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return found[0]


def sent_batches(monkeypatch) -> list[int]:
    """The size of each statement the writer sends."""
    sizes: list[int] = []
    real = batched._send
    monkeypatch.setattr(batched, "_send", lambda batch, db: (sizes.append(len(batch)), real(batch, db))[1])
    return sizes


def test_one_statement_writes_every_run_of_the_batch_each_with_its_checkpoint_and_results(monkeypatch):
    leases = [claimed()[2] for _ in range(3)]
    sizes = sent_batches(monkeypatch)

    batch = [step_write(lease) for lease in leases]
    batched.send(batch)

    assert sizes == [3] and all(write.held for write in batch)
    for lease in leases:
        assert list(Checkpoint.objects.filter(run_id=lease.run_id).values_list("seq", "step", "next_step")) == [
            (0, "", "first"), (1, "first", "second")]
        assert list(JournalEntry.objects.filter(run_id=lease.run_id, kind="activity").values_list(
            "visit", "call_index", "name", "result")) == [(0, 0, "llm.plan", "plan")]
        assert Run.objects.get(id=lease.run_id).checkpoint_seq == 1


def test_a_write_whose_lease_was_taken_writes_nothing_and_the_rest_of_its_batch_commits(monkeypatch):
    (lost_run, _, lost), (_, _, kept) = claimed(), claimed()
    steal(lost_run.id)
    sizes = sent_batches(monkeypatch)

    refused, written = step_write(lost), step_write(kept)
    batched.send([refused, written])

    assert sizes == [2]
    assert (refused.held, written.held) == (False, True)
    assert list(Checkpoint.objects.filter(run=lost_run).values_list("seq", flat=True)) == [0]
    assert not JournalEntry.objects.filter(run=lost_run, kind="activity").exists()
    assert Checkpoint.objects.filter(run_id=kept.run_id, seq=1).exists()


def test_a_result_is_a_write_of_its_own_fenced_on_the_visit_and_moves_no_checkpoint():
    run, _, lease = claimed()
    write = batched.Write(lease.run_id, lease.token, lease.seq, "first", None, timezone.now(),
                          calls=[batched.RecordedCall(0, "llm.plan", '{"answer": 42}')])

    batched.send([write])

    assert write.held
    assert JournalEntry.objects.get(run=run, kind="activity").result == {"answer": 42}
    run.refresh_from_db()
    assert (run.checkpoint_seq, run.current_step) == (0, "first")


def test_a_batch_postgres_refuses_is_sent_again_one_write_at_a_time_and_only_the_write_at_fault_fails(monkeypatch):
    (_, _, good), (bad_run, _, bad) = claimed(), claimed()
    sizes = sent_batches(monkeypatch)

    faulty = step_write(bad, state='{"text": "\\u0000"}')  # jsonb has no NUL: Postgres refuses the whole statement
    fine = step_write(good)
    batched.send([fine, faulty])

    assert sizes == [2, 1, 1]
    assert fine.held and fine.outcome() is fine
    with pytest.raises(DatabaseError):
        faulty.outcome()
    assert list(Checkpoint.objects.filter(run=bad_run).values_list("seq", flat=True)) == [0]


def test_a_write_postgres_refuses_raises_on_the_runs_thread_as_djangos_database_errors_do(monkeypatch):
    run, db, lease = claimed()
    handed = writes_handed(monkeypatch)
    with db.overlapping():
        given_back()
        db.commit_step(lease, "first", "second", {"steps": []}, -1)  # the schema version's CHECK refuses it
        with pytest.raises(IntegrityError):
            db.confirm_writes()
    assert len(handed) == 1
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]


def test_runs_advanced_at_once_are_written_whole_each_its_own_checkpoints():
    runs = [started() for _ in range(8)]
    gate = threading.Barrier(len(runs))

    def advanced(run_id: Any) -> None:
        try:
            gate.wait()
            advance(run_id)
        finally:
            connection.close()
    threads = [threading.Thread(target=advanced, args=(run.id,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.checkpoint_seq) == ("SUCCEEDED", 3)
        assert list(Checkpoint.objects.filter(run=run).order_by("seq").values_list("step", flat=True)) == [
            "", "first", "second", "third"]


def test_a_refused_write_stops_the_run_before_its_next_call_leaves(monkeypatch):
    run = started()
    handed = writes_handed(monkeypatch)

    def calls_then_loses_its_lease(ctx: Any) -> None:
        ctx.activity("llm.read", lambda: "read")  # the connection goes back before it: first's write is handed over
        assert Run.objects.filter(id=run.id).exists()  # a query reads the result's outcome first: it is written
        given_back()
        steal(run.id)  # the fence will refuse first's checkpoint
    hooks["first"] = calls_then_loses_its_lease
    asked: list[str] = []
    hooks["second"] = lambda ctx: ctx.activity("llm.plan", lambda: asked.append("asked") or "plan")

    advance(run.id)

    assert any(write.checkpoint is not None for write in handed)
    assert asked == []  # the call would have left on a lost lease: the refusal is read first
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]


def test_an_activity_result_is_written_as_it_answers_not_held_for_the_steps_write():
    seen: list[bool] = []

    def asks_then_waits(ctx: Any) -> None:
        ctx.activity("llm.plan", lambda: "plan")
        # Nothing else is written or asked here: the writer commits the result on its own.
        seen.append(bool(wait_for(lambda: elsewhere(lambda: JournalEntry.objects.filter(
            run_id=ctx.run_id, kind="activity", name="llm.plan").exists()), timeout=30, what="the result")))
    hooks["second"] = asks_then_waits
    run = started()

    assert advance(run.id).steps == 3
    assert seen == [True]


def test_a_pause_the_batched_write_found_is_noted_on_the_lease(monkeypatch):
    run, db, lease = claimed()
    Run.objects.filter(id=run.id).update(pause_requested_at=timezone.now())
    handed = writes_handed(monkeypatch)
    with db.overlapping():
        given_back()
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
        assert db.pause_asked(lease)
    assert len(handed) == 1
    assert Checkpoint.objects.filter(run=run, seq=1).exists()


def test_a_write_the_run_moved_past_is_refused(monkeypatch):
    run, db, lease = claimed()
    Run.objects.filter(id=run.id).update(checkpoint_seq=F("checkpoint_seq") + 1)  # as if another write came first
    handed = writes_handed(monkeypatch)
    with pytest.raises(LeaseLost), db.overlapping():
        given_back()
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
        db.confirm_writes()
    assert len(handed) == 1
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]


def test_a_thread_that_holds_its_connection_writes_on_it_and_one_that_gave_it_back_hands_the_write_over(
        monkeypatch):
    _, db, lease = claimed()
    handed = writes_handed(monkeypatch)
    with db.overlapping():
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)  # steps that only compute: in flight
        assert handed == [] and getattr(connection, "_durable_in_flight", None) is not None
        db.confirm_writes()
        given_back()  # as before a call
        db.record_activity(lease, "second", 0, "llm.plan", "plan")
        db.confirm_writes()  # the writer took and sent the result: the checkpoint is a write of its own
        db.commit_step(lease, "second", "third", {"steps": ["first", "second"]}, 1)
        db.confirm_writes()
    assert [(write.step, write.checkpoint is not None) for write in handed] == [("second", False), ("second", True)]
    assert list(Checkpoint.objects.filter(run_id=lease.run_id).order_by("seq").values_list("step", flat=True)) == [
        "", "first", "second"]
    assert JournalEntry.objects.get(run_id=lease.run_id, kind="activity").result == "plan"


@contextmanager
def writer_busy(monkeypatch) -> Iterator[None]:
    """The writer kept busy sending another run's write until the block ends: what is handed meanwhile waits."""
    release, real = threading.Event(), batched._send

    def held_first(batch: list[batched.Write], db: Any) -> None:
        release.wait(30)
        real(batch, db)
    monkeypatch.setattr(batched, "_send", held_first)
    other = started()
    lease, _ = store().claim(other.id, "w2", LEASE)
    busy = batched.hand(step_write(lease))
    wait_for(lambda: busy.taken, timeout=10, what="the writer taking the other run's write")
    try:
        yield
    finally:
        release.set()
        monkeypatch.setattr(batched, "_send", real)
        assert busy.outcome().held


def result_then_checkpoint_while_the_writer_is_busy(monkeypatch, db: Any, lease: Any) -> list[batched.Write]:
    """First's activity result, then its checkpoint, handed while the writer sends another run's write."""
    with writer_busy(monkeypatch):
        handed = writes_handed(monkeypatch)
        given_back()
        db.record_activity(lease, "first", 0, "llm.plan", "plan")
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
    return handed


def test_a_steps_checkpoint_joins_its_activitys_result_still_waiting_for_the_writer(monkeypatch):
    _, db, lease = claimed()
    with db.overlapping():
        handed = result_then_checkpoint_while_the_writer_is_busy(monkeypatch, db, lease)
        db.confirm_writes()
    assert [(write.step, [call.name for call in write.calls], write.checkpoint.next_step) for write in handed] == [
        ("first", ["llm.plan"], "second")]
    assert list(Checkpoint.objects.filter(run_id=lease.run_id).order_by("seq").values_list("step", flat=True)) == [
        "", "first"]
    assert JournalEntry.objects.get(run_id=lease.run_id, kind="activity").result == "plan"


def test_a_joined_write_whose_lease_was_taken_writes_neither_the_result_nor_the_checkpoint(monkeypatch):
    run, db, lease = claimed()
    steal(run.id)
    with pytest.raises(LeaseLost), db.overlapping():
        handed = result_then_checkpoint_while_the_writer_is_busy(monkeypatch, db, lease)
        db.confirm_writes()
    assert len(handed) == 1
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]
    assert not JournalEntry.objects.filter(run=run, kind="activity").exists()


def test_a_checkpoint_that_could_not_join_carries_the_renewal_of_the_lease_it_made():
    _, db, lease = claimed()
    with db.overlapping():
        given_back()
        db.record_activity(lease, "first", 0, "llm.plan", "plan")
        db.confirm_writes()  # the writer took and sent the result: the checkpoint goes alone
        before = Run.objects.get(id=lease.run_id).lease_expires_at
        lease.renewed_at -= LEASE  # as if the lease had run down: the step's write renews it
        given_back()
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
        db.confirm_writes()
    assert Run.objects.get(id=lease.run_id).lease_expires_at > before
