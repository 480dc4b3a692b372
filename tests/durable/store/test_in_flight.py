"""A step's write in flight while the next step runs (durable/store/in_flight.py), on real Postgres.

The write is fenced like every other, and its result is read before anything depends on it: the
next write, a call leaving the process, any other query or transaction. A worker whose write was
refused (its lease was taken) writes nothing more and calls nothing. No timing.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.test import override_settings
from pydantic import BaseModel

from durable import OnActiveBusinessKey, Workflow, register, services
from durable.engine.errors import LeaseLost
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.runtime import pausing
from durable.runtime.executor import advance
from durable.store import in_flight, store

pytestmark = pytest.mark.django_db(transaction=True)  # a thief's update must commit, as on a real database

LEASE = 60.0


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the portable store confirms every write before it returns")


@pytest.fixture(autouse=True)
def pipelined(settings):
    """These tests are about the write each thread leaves in flight on its own connection; batched step writes
    (durable/store/batched.py, tests/durable/store/test_batched.py) are the other way there."""
    settings.DURABLE_BATCH_STEP_WRITES = False


class Seen(BaseModel):
    steps: list[str] = []


# What each step does besides noting that it ran, set by each test.
hooks: dict[str, Callable[[Any], None]] = {}
called: list[str] = []


def _step(name: str) -> Callable[[Any, Seen], Seen]:
    def run(ctx: Any, state: Seen) -> Seen:
        called.append(name)
        if name in hooks:
            hooks[name](ctx)
        state.steps.append(name)
        return state
    return run


in_flight_wf = Workflow(name="test-in-flight", version=1, state=Seen, input=Seen,
                        on_active_business_key=OnActiveBusinessKey.START_ANOTHER)
for _name in ("first", "second", "third"):
    in_flight_wf.step(_step(_name), name=_name)
register(in_flight_wf)


@pytest.fixture(autouse=True)
def clean_hooks():
    hooks.clear()
    called.clear()
    yield
    hooks.clear()


def started() -> Run:
    run, _ = services.start_run(workflow="test-in-flight", input={}, business_key="in-flight")
    return run


@contextmanager
def writes_read_together() -> Iterator[list[int]]:
    """How many writes each settle read at once, while inside."""
    queued: list[int] = []
    original = in_flight.settle

    def counting_settle(db: Any) -> None:
        queue = getattr(db, "_durable_in_flight", None)
        queued.append(len(queue.writes) if queue else 0)
        original(db)
    with patch.object(in_flight, "settle", counting_settle):
        yield queued


def claimed() -> tuple[Run, Any, Any]:
    """A new run, the store and the lease worker w1 holds on it: for tests that drive the store by hand."""
    run = started()
    db = store()
    lease, _ = db.claim(run.id, "w1", LEASE)
    return run, db, lease


def steal(run_id) -> None:
    """Another worker takes the run: its token moves on, committed on a connection of its own."""
    def take() -> None:
        try:
            Run.objects.filter(id=run_id).update(fencing_token=F("fencing_token") + 1)
        finally:
            connection.close()
    thief = threading.Thread(target=take)
    thief.start()
    thief.join()


def in_flight_now() -> bool:
    return getattr(connection, "_durable_in_flight", None) is not None


def test_the_next_step_runs_while_the_previous_write_is_in_flight_and_every_write_is_confirmed_by_the_end():
    seen: list[bool] = []
    hooks["second"] = hooks["third"] = lambda ctx: seen.append(in_flight_now())
    run = started()

    assert advance(run.id).steps == 3
    assert seen == [True, True]  # first's write, then second's, were still in flight
    assert not in_flight_now()
    run.refresh_from_db()
    assert run.status == "SUCCEEDED" and run.checkpoint_seq == 3
    assert list(Checkpoint.objects.filter(run=run).order_by("seq").values_list("seq", "step")) == [
        (0, ""), (1, "first"), (2, "second"), (3, "third")]


def test_a_write_refused_while_in_flight_stops_the_run_before_anything_more_is_written():
    run = started()
    hooks["first"] = lambda ctx: steal(run.id)  # before first's write is sent: the fence will refuse it

    outcome = advance(run.id)

    assert outcome.claimed and outcome.steps < 3
    assert "third" not in called  # second's write read first's refusal before third could run
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]
    run.refresh_from_db()
    assert run.checkpoint_seq == 0 and run.current_step == "first"


def test_no_activity_is_called_on_a_lease_the_write_in_flight_found_lost():
    run = started()
    hooks["first"] = lambda ctx: steal(run.id)
    asked: list[str] = []
    hooks["second"] = lambda ctx: ctx.activity("llm.plan", lambda: asked.append("asked") or "plan")

    advance(run.id)

    assert asked == []  # the call would have left on a lost lease: the refusal is read first
    assert not JournalEntry.objects.filter(run=run, kind="activity").exists()


def test_a_step_may_query_and_open_a_transaction_while_a_write_is_in_flight():
    counts: list[int] = []

    def business_reads_and_writes(ctx: Any) -> None:
        assert in_flight_now()
        with transaction.atomic():  # turning autocommit off reads the write's result first
            counts.append(Checkpoint.objects.filter(run_id=ctx.run_id).count())
        counts.append(Run.objects.filter(id=ctx.run_id, checkpoint_seq=1).count())
    hooks["second"] = business_reads_and_writes
    run = started()

    assert advance(run.id).steps == 3
    assert counts == [2, 1]  # the queries saw first's write committed


def test_a_write_that_fails_in_flight_raises_as_djangos_database_errors_do():
    run, db, lease = claimed()
    with db.overlapping():
        db.commit_step(lease, "first", "second", {"steps": []}, -1)  # the schema version's CHECK refuses it
        assert in_flight_now()
        with pytest.raises(IntegrityError):
            db.confirm_writes()
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]


def test_the_lease_holder_keeps_the_fence_when_the_write_in_flight_is_refused():
    run, db, lease = claimed()
    with pytest.raises(LeaseLost), db.overlapping():
        steal(run.id)
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)  # sent; refused by the fence
        db.commit_step(lease, "second", "third", {"steps": ["first", "second"]}, 1)  # reads that first
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", flat=True)) == [0]


def test_the_finish_is_queued_behind_the_last_step_write_and_both_are_read_before_the_task_ends():
    run = started()

    with writes_read_together() as queued:
        assert advance(run.id).steps == 3
    assert max(queued) == 2  # second's write and the finish, read together
    assert not in_flight_now()
    run.refresh_from_db()
    assert run.status == "SUCCEEDED" and run.checkpoint_seq == 3 and run.lease_owner is None


def test_a_finish_queued_behind_a_refused_write_writes_nothing(settings, monkeypatch):
    # A look for a pause at a boundary would read the refusal before third: none by the clock, and none because a
    # thread an earlier test left behind made a call (the count of calls is the process's).
    settings.DURABLE_PAUSE_LOOK_SECONDS = 3600
    monkeypatch.setattr(pausing, "call_made", lambda: None)
    run = started()
    hooks["second"] = lambda ctx: steal(run.id)  # second's write goes out refused; the finish queues behind it

    outcome = advance(run.id)

    assert outcome.claimed and "third" in called  # pure code ran on; nothing it computed is written
    assert list(Checkpoint.objects.filter(run=run).order_by("seq").values_list("seq", flat=True)) == [0, 1]
    run.refresh_from_db()
    assert run.status == "RUNNING" and run.checkpoint_seq == 1 and run.output is None


def test_a_finish_whose_lease_was_taken_during_the_last_step_is_refused():
    run = started()
    hooks["third"] = lambda ctx: steal(run.id)

    advance(run.id)

    run.refresh_from_db()
    assert run.status == "RUNNING" and run.finished_at is None
    assert not Checkpoint.objects.filter(run=run, seq=3).exists()


def test_writes_are_prepared_and_sent_again_in_order_when_a_rollback_dropped_the_prepared_statements(unpooled):
    """(A session of its own: the DEALLOCATE below leaves psycopg's own prepared statements unknown to the server,
    which a pool would hand to the next test.)"""
    run, db, lease = claimed()
    with db.overlapping():
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE ALL")  # what psycopg sends after a rollback on the connection
        db.commit_step(lease, "second", "third", {"steps": ["first", "second"]}, 1)  # refused: 26000
        db.finish(lease, "third", {"steps": ["first", "second", "third"]}, 1, {"done": True})  # fenced out behind it
    run.refresh_from_db()
    assert run.status == "SUCCEEDED" and run.output == {"done": True}
    assert list(Checkpoint.objects.filter(run=run).order_by("seq").values_list("seq", flat=True)) == [0, 1, 2, 3]


def operation(lease: Any, op_id: str = "op-in-flight") -> dict[str, Any]:
    return {"operation_id": op_id, "run_id": lease.run_id, "step": "second", "action_name": "charge",
            "business_key": "in-flight", "downstream": "payments", "request_hash": "h" * 64,
            "payload": {"amount": "10.00", "note": "caf\u00e9"}}


def test_a_side_effects_prepare_is_queued_behind_the_step_write_and_read_back_as_the_orm_reads_it():
    run, db, lease = claimed()
    with db.overlapping():
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)
        assert in_flight_now()
        row, created = db.prepare_operation(lease, operation(lease))
        assert not in_flight_now()
        again, created_again = db.prepare_operation(lease, operation(lease))

    stored = SideEffect.objects.get(operation_id="op-in-flight")
    assert created and not created_again
    for prepared in (row, again):
        assert [getattr(prepared, f.attname) for f in SideEffect._meta.concrete_fields] == [
            getattr(stored, f.attname) for f in SideEffect._meta.concrete_fields]
    assert row.payload == {"amount": "10.00", "note": "caf\u00e9"} and row.run_id == run.id


def test_nothing_is_prepared_behind_a_step_write_the_fence_refused():
    run, db, lease = claimed()
    with pytest.raises(LeaseLost), db.overlapping():
        steal(run.id)
        db.commit_step(lease, "first", "second", {"steps": ["first"]}, 1)  # refused in flight
        db.prepare_operation(lease, operation(lease))  # queued behind it: fenced on the seq it did not set
    assert not SideEffect.objects.exists()


@override_settings(DURABLE_PIPELINE_STEP_WRITES=False)
def test_with_pipelining_off_every_step_write_is_confirmed_before_the_next_step():
    seen: list[bool] = []
    hooks["second"] = lambda ctx: seen.append(in_flight_now())
    run = started()

    assert advance(run.id).steps == 3
    assert seen == [False]


def test_a_run_advanced_inside_another_runs_step_leaves_the_outer_guard_in_place():
    inner = started()
    seen: list[bool] = []

    def advance_another(ctx: Any) -> None:
        hooks.pop("first")  # the inner run's first step is plain
        assert advance(inner.id).steps == 3
        seen.append(connection._set_autocommit.__name__ == "set_autocommit")  # still guarded
    hooks["first"] = advance_another
    outer = started()

    assert advance(outer.id).steps == 3
    assert seen == [True]
    assert "_set_autocommit" not in connection.__dict__ and not in_flight_now()
    assert Run.objects.filter(id__in=[inner.id, outer.id], status="SUCCEEDED").count() == 2


@override_settings(DURABLE_PREPARE_STATEMENTS=False)
def test_behind_a_transaction_pooler_nothing_is_queued_behind_a_write_in_flight():
    run = started()

    with writes_read_together() as queued:
        assert advance(run.id).steps == 3
    assert max(queued) == 1  # the pooler could run two queued transactions on two sessions, out of order
    run.refresh_from_db()
    assert run.status == "SUCCEEDED"


@override_settings(DURABLE_PREPARE_STATEMENTS=False)
def test_behind_a_transaction_pooler_the_write_in_flight_is_not_prepared(unpooled):
    connection.close()  # a new session: nothing prepared on it yet
    seen: list[bool] = []
    hooks["second"] = lambda ctx: seen.append(in_flight_now())
    run = started()

    assert advance(run.id).steps == 3 and seen == [True]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE name = 'durable_step_write'")
        assert cursor.fetchone()[0] == 0
