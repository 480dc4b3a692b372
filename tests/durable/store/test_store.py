"""Step and ledger writes: fenced, and one commit per plain step on every backend."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from durable import services
from durable.engine.errors import LeaseLost
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime import executor
from durable.store import store
from durable.tools.bench.commits import count_commits


@pytest.mark.django_db(transaction=True)
def test_plain_steps_commit_once_each(settings):
    settings.DURABLE_BATCH_STEP_WRITES = False  # batched, the process's writer commits them (test_batched.py)
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    with count_commits() as counter:
        executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.checkpoint_seq == 10
    # 10 step commits (the last one also finishes the run and releases the lease) + 1 lease claim
    assert counter.commits == 11


def statements_of(call) -> list[str]:
    """The SQL statements `call()` sends."""
    before = len(connection.queries_log)
    connection.force_debug_cursor = True
    try:
        call()
        return [q["sql"] for q in list(connection.queries_log)[before:]]
    finally:
        connection.force_debug_cursor = False


@pytest.mark.django_db(transaction=True)
def test_step_write_is_one_statement_on_postgres():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    lease, _ = db.claim(run.id, "w1", 30)
    statements = statements_of(lambda: db.commit_step(lease, "step1", "step2", {"n": 1}, 1))
    writes = [s for s in statements if not s.startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))]
    if connection.vendor == "postgresql":
        assert len(writes) == 1 and writes[0].lstrip().startswith("WITH fenced"), statements
    else:  # SQLite has no data-modifying CTE: UPDATE + INSERT in one local transaction
        assert len(writes) == 2, statements


@pytest.mark.django_db
def test_fenced_writes_refuse_a_stale_token():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    lease, _ = db.claim(run.id, "w1", 30)
    Run.objects.filter(id=run.id).update(fencing_token=lease.token + 1)
    with pytest.raises(LeaseLost):
        db.commit_step(lease, "step1", "step2", {"n": 1}, 1)
    with pytest.raises(LeaseLost):
        db.record_activity(lease, "step1", 0, "x", 1)
    assert run.checkpoints.count() == 1 and run.journal.count() == 0


@pytest.mark.django_db
def test_only_one_worker_can_claim_a_run():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    first = db.claim(run.id, "w1", 30)
    assert first is not None and first[0].token == 1
    assert db.claim(run.id, "w2", 30) is None


@pytest.mark.django_db(transaction=True)
def test_of_many_workers_claiming_a_run_at_once_exactly_one_gets_it():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    workers = 6
    ready = threading.Barrier(workers)
    results: list = []

    def claim(owner: str) -> None:
        try:
            ready.wait()
            results.append(store().claim(run.id, owner, 30))
        except Exception as exc:  # a database error is a failed claim here, and must show in the test
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [r for r in results if r is not None]
    assert len(winners) == 1, results
    lease, _ = winners[0]
    run.refresh_from_db()
    assert run.fencing_token == lease.token == 1 and run.lease_owner == lease.owner


@pytest.mark.django_db
def test_an_expired_lease_goes_to_the_next_claimer_with_a_new_token():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    first, _ = db.claim(run.id, "w1", 30)
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=5))

    second, claimed = db.claim(run.id, "w2", 30)

    assert second.token == first.token + 1 and claimed.lease_owner == "w2"
    assert second.resuming and 5 <= second.waited_seconds < 30


@pytest.mark.django_db
def test_a_claim_is_one_statement_on_postgres():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    statements = statements_of(lambda: store().claim(run.id, "w1", 30))
    if connection.vendor == "postgresql":
        # the claim's UPDATE, which also returns the newest checkpoint and the recorded activity results
        assert len(statements) == 1 and "UPDATE durable_run" in statements[0], statements
    else:  # the portable claim reads the run, then updates it on the token it read
        assert len(statements) == 2, statements


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db
def test_on_postgres_the_executors_statements_are_prepared_and_the_consoles_queries_are_not(settings):
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are Postgres'")
    from durable.models import RunSearch

    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    executor.advance(run.id)
    for _ in range(10):  # a console search, asked more often than psycopg's default threshold (5)
        list(RunSearch.objects.filter(business_key__contains="ord-1"))
    prepared = prepared_statements()
    assert any("UPDATE durable_run" in sql and "durable_checkpoint" in sql for sql in prepared), prepared  # a step
    assert any("FOR UPDATE" in sql for sql in prepared), prepared  # the claim
    assert not any("durable_runsearch" in sql for sql in prepared), prepared  # keeps its custom plans

    settings.DURABLE_PREPARE_STATEMENTS = False  # behind a transaction-pooling PgBouncer
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # psycopg forgets its own prepared names too
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t2")
    executor.advance(run.id)
    assert Run.objects.get(id=run.id).status == RunStatus.SUCCEEDED and prepared_statements() == []


@pytest.mark.django_db(transaction=True)
def test_a_side_effect_costs_three_commits_beyond_its_steps_checkpoint(settings):
    settings.DURABLE_BATCH_STEP_WRITES = False  # batched, the process's writer commits the checkpoints
    import tests.durable.ledger_workflows  # noqa: F401  registers the probe workflow

    run, _ = services.start_run(workflow="test-ledger-probe", input={}, business_key="p")
    with count_commits() as counter:
        executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    # claim + 2 step checkpoints + the ledger's PENDING, STARTED and SUCCEEDED writes
    assert counter.commits == 1 + 2 + 3


# The ledger's writes: fenced like the steps', one statement each on Postgres


def ledger_lease():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    lease, _ = db.claim(run.id, "w1", 30)
    return db, lease


def operation_fields(lease, op_id="op-1"):
    return {"operation_id": op_id, "run_id": lease.run_id, "step": "step1", "action_name": "charge",
            "business_key": "t", "downstream": "payments", "request_hash": "h" * 64, "payload": {"amount": "10.00"}}


@pytest.mark.django_db
def test_preparing_an_operation_inserts_it_pending_once_and_then_returns_it_as_it_is():
    db, lease = ledger_lease()
    row, created = db.prepare_operation(lease, operation_fields(lease))
    assert created and (row.status, row.attempts, row.payload) == (Op.PENDING, 0, {"amount": "10.00"})
    SideEffect.objects.filter(operation_id="op-1").update(status=Op.STARTED, attempts=1)
    again, created = db.prepare_operation(lease, operation_fields(lease))
    assert not created and (again.status, again.attempts, again.request_hash) == (Op.STARTED, 1, "h" * 64)
    assert SideEffect.objects.count() == 1


@pytest.mark.django_db
def test_moving_an_operation_writes_the_fields_and_its_journal_entry_together():
    db, lease = ledger_lease()
    row, _ = db.prepare_operation(lease, operation_fields(lease))
    assert db.move_operation(lease, row, frozenset({Op.PENDING}), Op.STARTED, journal=None, count_attempt=True)
    moved_at = db.move_operation(lease, row, frozenset({Op.STARTED}), Op.SUCCEEDED, journal={"external_ref": "re_1"},
                                 external_ref="re_1", result_json={"id": "re_1"}, last_error=None)
    row.refresh_from_db()
    assert (row.status, row.attempts, row.external_ref, row.result_json) == (Op.SUCCEEDED, 1, "re_1", {"id": "re_1"})
    assert row.updated_at == moved_at
    assert SideEffect.objects.filter(operation_id=row.operation_id, last_error__isnull=True).exists()  # SQL NULL
    [entry] = JournalEntry.objects.filter(run_id=lease.run_id, kind=JournalEntry.Kind.SIDE_EFFECT)
    assert (entry.step, entry.name, entry.detail, entry.fencing_token) == ("step1", "charge", {"external_ref": "re_1"},
                                                                            lease.token)


@pytest.mark.django_db
def test_an_operation_no_longer_in_the_expected_status_is_not_moved_nor_journaled():
    db, lease = ledger_lease()
    row, _ = db.prepare_operation(lease, operation_fields(lease))
    SideEffect.objects.filter(operation_id=row.operation_id).update(status=Op.UNKNOWN)  # the sweeper got there first
    assert db.move_operation(lease, row, frozenset({Op.STARTED}), Op.SUCCEEDED, journal={"x": 1},
                             external_ref="re_1") is None
    row.refresh_from_db()
    assert (row.status, row.external_ref) == (Op.UNKNOWN, "")
    assert not JournalEntry.objects.filter(kind=JournalEntry.Kind.SIDE_EFFECT).exists()


@pytest.mark.django_db
def test_ledger_writes_refuse_a_stale_token_and_write_nothing():
    db, lease = ledger_lease()
    row, _ = db.prepare_operation(lease, operation_fields(lease))
    Run.objects.filter(id=lease.run_id).update(fencing_token=lease.token + 1)
    with pytest.raises(LeaseLost):
        db.prepare_operation(lease, operation_fields(lease, "op-2"))
    with pytest.raises(LeaseLost):
        db.move_operation(lease, row, frozenset({Op.PENDING}), Op.STARTED, journal={"x": 1}, count_attempt=True)
    row.refresh_from_db()
    assert (row.status, row.attempts) == (Op.PENDING, 0)
    assert list(SideEffect.objects.values_list("operation_id", flat=True)) == ["op-1"]
    assert not JournalEntry.objects.filter(kind=JournalEntry.Kind.SIDE_EFFECT).exists()


@pytest.mark.django_db(transaction=True)
def test_each_ledger_write_is_one_statement_on_postgres():
    db, lease = ledger_lease()
    row = None

    def prepare():
        nonlocal row
        row, _ = db.prepare_operation(lease, operation_fields(lease))

    writes = [statements_of(prepare),
              statements_of(lambda: db.move_operation(lease, row, frozenset({Op.PENDING}), Op.STARTED, journal=None,
                                                      count_attempt=True)),
              statements_of(lambda: db.move_operation(lease, row, frozenset({Op.STARTED}), Op.SUCCEEDED,
                                                      journal={"external_ref": "re_1"}, external_ref="re_1"))]
    if connection.vendor == "postgresql":
        assert [len(statements) for statements in writes] == [1, 1, 1], writes
        assert all(statements[0].lstrip().startswith("WITH fenced") for statements in writes)
    else:  # SQLite: BEGIN, the fence, the ledger row's statements (and the journal entry), COMMIT
        assert [len(statements) for statements in writes] == [7, 4, 5], writes


@pytest.mark.django_db(transaction=True)
def test_the_store_writes_on_after_its_connection_was_closed():
    # The Postgres store keeps a cursor per connection; a closed connection (the heartbeat closes its
    # own when idle, Django's CONN_MAX_AGE closes old ones) must give the next statement a new one.
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db = store()
    lease, _ = db.claim(run.id, "w1", 30)
    db.commit_step(lease, "step1", "step2", {"n": 1}, 1)
    connection.close()
    db.commit_step(lease, "step2", "step3", {"n": 2}, 1)
    assert Run.objects.get(id=run.id).checkpoint_seq == 2


@pytest.mark.django_db
def test_on_postgres_a_failed_store_statement_raises_djangos_database_error():
    if connection.vendor != "postgresql":
        pytest.skip("the kept cursor is the Postgres store's")
    from django.db import DatabaseError

    from durable.store.statements import run_statement

    with pytest.raises(DatabaseError):  # the heartbeat catches django.db's errors, not psycopg's
        run_statement("SELECT no_such_column FROM durable_run", {})
