"""The side-effect ledger: Prepare -> Execute -> Commit -> Checkpoint, each transition through a real run."""
import hashlib

import httpx
import pytest
from django.db import connection

from durable import NonRetryableError, services
from durable.downstream import REPAIRED, DownstreamOutcome
from durable.engine.errors import LeaseLost, OperationConflict
from durable.engine.ids import canonical_json, request_hash, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, SideEffect
from durable.runtime import executor, ledger, side_effects
from durable.store import store
from durable.tools.faults import AFTER_COMMIT, AFTER_PREPARE
from tests.durable.ledger_workflows import crash_at, expire_lease, make_retry_due, probe

pytestmark = pytest.mark.django_db

REFUND = "Hello, order ORD-1001 arrived broken. I would like a refund please."
REFUND_PAYLOAD = {"order_id": "ORD-1001", "amount": "120.00", "currency": "EUR"}


@pytest.fixture(autouse=True)
def fresh_probe():
    probe.reset()
    yield probe
    probe.reset()


def start_claim(order_id="ORD-1001"):
    run, _ = services.start_run(workflow="claims-agent", version=1, input={"order_id": order_id, "customer_message": REFUND},
                                business_key=order_id, allow_older_version=True)
    return run


def start_probe(workflow="test-ledger-probe", **input):
    run, _ = services.start_run(workflow=workflow, input=input, business_key=input.get("business_key", "B-1"))
    return run


def advance(run):
    executor.advance(run.id)
    run.refresh_from_db()
    return run


def operation(run, action):
    return SideEffect.objects.get(run=run, action_name=action)


def payments(sandbox):
    return sandbox.state.calls_snapshot()["payments"]


def expected_operation_id(run, action, business_key):
    return hashlib.sha256(f"{run.id}:{action}:{business_key}".encode()).hexdigest()[:32]


# Prepare


def test_prepare_creates_a_pending_row_with_the_id_and_request_hash_and_sends_nothing():
    run = start_probe(amount="12.50")
    lease, _ = store().claim(run.id, "test-worker", 60)
    row = side_effects.prepare(store(), lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                               payload={"amount": "12.50"})
    row = SideEffect.objects.get(pk=row.pk)
    assert (row.status, row.attempts, row.step, row.downstream) == (Op.PENDING, 0, "charge", "probe")
    assert row.operation_id == expected_operation_id(run, "charge", "B-1")
    assert row.request_hash == request_hash({"amount": "12.50"}) == sha256_hex('{"amount":"12.50"}')
    assert row.payload == {"amount": "12.50"}
    assert probe.calls == []


def test_preparing_the_same_request_again_returns_the_same_row():
    run = start_probe()
    lease, _ = store().claim(run.id, "test-worker", 60)
    first = side_effects.prepare(store(), lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                                 payload={"amount": "10.00"})
    again = side_effects.prepare(store(), lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                                 payload={"amount": "10.00"})
    assert again.operation_id == first.operation_id and SideEffect.objects.count() == 1


def test_a_crash_after_prepare_leaves_a_pending_row_that_the_rerun_sends_once(demo, monkeypatch):
    run = start_claim()
    crash_at(monkeypatch, AFTER_PREPARE, "refund")
    with pytest.raises(BaseException, match="after_prepare"):
        executor.advance(run.id)
    row = operation(run, "refund")
    assert (row.status, row.attempts) == (Op.PENDING, 0)
    assert payments(demo)["calls"] == 0

    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert (operation(run, "refund").status, operation(run, "refund").attempts) == (Op.SUCCEEDED, 1)
    assert payments(demo)["calls_by_key"] == {row.operation_id: 1}


# The operation id


def test_the_operation_id_is_the_hash_of_run_action_and_business_key_and_is_the_idempotency_key_sent(demo):
    run = advance(start_claim())
    assert run.status == RunStatus.SUCCEEDED
    ids = {row.action_name: row.operation_id for row in run.side_effects.all()}
    assert ids == {action: expected_operation_id(run, action, "ORD-1001") for action in ("refund", "ticket", "notify")}
    calls = demo.state.calls_snapshot()
    assert calls["payments"]["calls_by_key"] == {ids["refund"]: 1}
    assert calls["tickets"]["calls_by_key"] == {ids["ticket"]: 1}
    assert calls["notifications"]["calls_by_key"] == {ids["notify"]: 1}
    assert demo.state.list_refunds()[0]["idempotency_key"] == ids["refund"]


def test_two_runs_for_the_same_order_get_different_operation_ids(demo):
    first = advance(start_claim())
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "0.00"})  # a new claim on the order
    second = advance(start_claim())
    assert operation(first, "refund").operation_id != operation(second, "refund").operation_id
    assert payments(demo)["effects"] == 2


# Execute: STARTED is committed before the downstream is called


@pytest.mark.django_db(transaction=True)
def test_started_is_committed_before_the_downstream_is_called(sent):
    seen = []

    def look_at_the_ledger(operation_id, business_key, payload):
        row = SideEffect.objects.get(operation_id=operation_id)
        # Not inside any transaction: what was written before this call is committed.
        seen.append((row.status, row.attempts, connection.in_atomic_block))

    probe.on_execute = look_at_the_ledger
    run = advance(start_probe())
    assert run.status == RunStatus.SUCCEEDED
    assert seen == [(Op.STARTED, 1, False)]
    assert operation(run, "charge").status == Op.SUCCEEDED


# Commit: SUCCEEDED before the checkpoint; re-entry returns the recorded result


def test_success_is_committed_with_ref_result_and_response_hash_before_the_checkpoint(demo, monkeypatch):
    run = start_claim()
    crash_at(monkeypatch, AFTER_COMMIT, "refund")
    with pytest.raises(BaseException, match="after_commit"):
        executor.advance(run.id)
    run.refresh_from_db()
    row = operation(run, "refund")
    refund = demo.state.list_refunds()[0]
    assert (row.status, row.external_ref, row.result_json) == (Op.SUCCEEDED, "re_1", refund)
    assert row.response_hash == sha256_hex(canonical_json(refund))
    assert (run.current_step, run.checkpoint_seq) == ("payment", 3)  # the payment step is not checkpointed
    assert not run.checkpoints.filter(step="payment").exists()
    assert JournalEntry.objects.filter(run=run, kind="side_effect", detail__status="SUCCEEDED",
                                       detail__external_ref="re_1").count() == 1


def test_rerunning_a_committed_step_returns_the_recorded_result_without_calling_again(demo, monkeypatch):
    run = start_claim()
    crash_at(monkeypatch, AFTER_COMMIT, "refund")
    with pytest.raises(BaseException, match="after_commit"):
        executor.advance(run.id)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["refund_id"] == "re_1"
    row = operation(run, "refund")
    assert payments(demo)["calls_by_key"] == {row.operation_id: 1}
    assert payments(demo)["effects"] == 1
    assert (row.duplicates_prevented, row.attempts) == (1, 1)
    prevented = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.DUPLICATE_PREVENTED)
    assert (prevented.step, prevented.name) == ("payment", "refund")
    assert prevented.detail == {"operation_id": row.operation_id, "external_ref": "re_1",
                                "done_in_visit": row.visit}
    assert row.visit == prevented.visit  # the re-executed visit is the one that prepared it


# A changed request under the same operation id


def test_prepare_refuses_the_same_operation_with_a_different_request_naming_both_hashes():
    run = start_probe()
    lease, _ = store().claim(run.id, "test-worker", 60)
    side_effects.prepare(store(), lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                         payload={"amount": "10.00"})
    first, second = request_hash({"amount": "10.00"}), request_hash({"amount": "99.00"})
    with pytest.raises(OperationConflict) as refused:
        side_effects.prepare(store(), lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                             payload={"amount": "99.00"})
    assert first in str(refused.value) and second in str(refused.value)
    assert "new business key" in str(refused.value)
    assert SideEffect.objects.get().request_hash == first


def test_a_run_asking_for_a_different_request_under_a_prepared_operation_fails_and_sends_nothing(demo):
    run = start_claim()
    # An earlier attempt prepared this refund for another amount (the order changed in between).
    db = store()
    lease, _ = db.claim(run.id, "earlier-worker", 60)
    side_effects.prepare(db, lease, step="payment", action="refund", business_key="ORD-1001", downstream="payments",
                         payload={**REFUND_PAYLOAD, "amount": "1.00"})
    db.release(lease)

    run = advance(run)
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("operation_conflict", False, "payment")
    assert request_hash({**REFUND_PAYLOAD, "amount": "1.00"}) in run.error["message"]
    assert request_hash(REFUND_PAYLOAD) in run.error["message"]
    assert operation(run, "refund").status == Op.PENDING
    assert payments(demo)["calls"] == 0


# FAILED_RETRYABLE and FAILED_FINAL


def test_a_503_marks_the_operation_failed_retryable_and_the_retry_resends_the_same_key_once(demo):
    demo.state.arm_fault("payments", "503", times=1)
    run = advance(start_claim())
    row = operation(run, "refund")
    assert run.status == RunStatus.WAITING_RETRY
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("transient_http", True, "payment")
    assert (row.status, row.attempts, row.last_error["kind"]) == (Op.FAILED_RETRYABLE, 1, "transient_http")
    assert JournalEntry.objects.filter(run=run, kind="side_effect", detail__status="FAILED_RETRYABLE").exists()

    make_retry_due(run)
    run = advance(run)
    row.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert (row.status, row.attempts, row.last_error) == (Op.SUCCEEDED, 2, None)
    assert payments(demo)["calls_by_key"] == {row.operation_id: 2}
    assert payments(demo)["effects"] == 1


def test_a_4xx_answer_marks_the_operation_failed_final_and_fails_the_run(demo):
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})  # refunds 0.00: payments says 400
    run = advance(start_claim())
    row = operation(run, "refund")
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("invalid_request", False, "payment")
    assert (row.status, row.attempts, row.last_error["kind"]) == (Op.FAILED_FINAL, 1, "invalid_request")
    assert (payments(demo)["calls"], payments(demo)["effects"]) == (1, 0)
    assert not run.side_effects.filter(action_name__in=["ticket", "notify"]).exists()


def test_a_failed_final_operation_is_never_sent_again_even_when_the_run_is_retried(demo):
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})
    run = advance(start_claim())
    services.retry_run(run_id=run.id, user=None, source="test", reason="try again")
    run = advance(run)
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["step"]) == ("side_effect_failed", "payment")
    assert operation(run, "refund").operation_id in run.error["message"]
    assert payments(demo)["calls"] == 1


@pytest.mark.parametrize("said, recorded", [
    ("card declined", "card declined"),
    ("card declined \x00\ud800", "card declined \ufffd\ufffd"),  # text the database cannot store, repaired
])
def test_a_business_rejection_from_an_adapter_is_failed_final(said, recorded):
    def decline(operation_id, business_key, payload):
        raise NonRetryableError(said, kind="business_rejection")

    probe.on_execute = decline
    run = advance(start_probe())
    row = operation(run, "charge")
    assert run.status == RunStatus.FAILED and run.error["kind"] == "business_rejection"
    assert run.error["message"] == f"charge on probe: {recorded}"
    assert (row.status, row.last_error["message"]) == (Op.FAILED_FINAL, recorded)
    assert len(probe.calls) == 1


def test_a_connection_refused_never_reached_the_downstream_and_is_failed_retryable():
    def refuse_once(operation_id, business_key, payload):
        if len(probe.calls) == 1:
            raise httpx.ConnectError("connection refused")

    probe.on_execute = refuse_once
    run = advance(start_probe())
    row = operation(run, "charge")
    assert run.status == RunStatus.WAITING_RETRY
    assert (row.status, row.last_error["kind"]) == (Op.FAILED_RETRYABLE, "network")
    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["charge"]["ref"] == "probe-2"
    assert [c[0] for c in probe.calls] == [row.operation_id] * 2


# What a downstream answers that the database cannot store: the action happened, so it is recorded repaired


@pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight, as in production
def test_a_downstream_answer_the_database_cannot_store_is_recorded_as_a_storable_copy_and_the_run_goes_on():
    probe.on_execute = lambda operation_id, business_key, payload: DownstreamOutcome(
        "ch_\x001", {"note": "paid\x00", "by": "an LLM wrote \ud800", "fee": float("nan"), "ok": True})
    run = advance(start_probe())
    row = operation(run, "charge")
    stored = {"note": "paid\ufffd", "by": "an LLM wrote \ufffd", "fee": None, "ok": True}
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert (row.status, row.external_ref, row.result_json) == (Op.SUCCEEDED, "ch_\ufffd1", stored)
    assert row.response_hash == sha256_hex(canonical_json(stored))
    assert run.output["charge"] == {**stored, "external_ref": "ch_\ufffd1"}  # the step got what was recorded
    [success] = [e.detail for e in JournalEntry.objects.filter(run=run, kind="side_effect")
                 if e.detail["status"] == Op.SUCCEEDED]
    assert success["evidence"] == REPAIRED and success["external_ref"] == "ch_\ufffd1"
    assert len(probe.calls) == 1



# Refusals


def test_an_undeclared_side_effect_is_refused_before_anything_is_prepared_or_sent():
    run = advance(start_probe(workflow="test-ledger-undeclared"))
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == (
        "undeclared_side_effect", False, "sneaky_charge")
    assert "side_effects=['charge']" in run.error["message"]
    assert not SideEffect.objects.exists()
    assert probe.calls == []


def test_a_worker_that_lost_its_lease_cannot_move_an_operation():
    run = start_probe()
    db = store()
    lease, _ = db.claim(run.id, "paused-worker", 60)
    row = side_effects.prepare(db, lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                               payload={"amount": "10.00"})
    expire_lease(run)
    assert db.claim(run.id, "other-worker", 60) is not None  # the fencing token moved on
    with pytest.raises(LeaseLost):
        ledger.mark_started(db, lease, row)
    assert SideEffect.objects.get(pk=row.pk).status == Op.PENDING


def test_a_commit_for_an_operation_settled_meanwhile_is_refused_as_stale():
    run = start_probe()
    db = store()
    lease, _ = db.claim(run.id, "test-worker", 60)
    row = side_effects.prepare(db, lease, step="charge", action="charge", business_key="B-1", downstream="probe",
                               payload={"amount": "10.00"})
    ledger.mark_started(db, lease, row)
    SideEffect.objects.filter(pk=row.pk).update(status=Op.UNKNOWN)  # the sweeper's reconciler got there first
    with pytest.raises(ledger.StaleOperation) as stale:
        ledger.commit_success(db, lease, row, probe.execute(row.operation_id, "B-1", {"amount": "10.00"}))
    assert stale.value.retryable is True
    assert SideEffect.objects.get(pk=row.pk).status == Op.UNKNOWN
