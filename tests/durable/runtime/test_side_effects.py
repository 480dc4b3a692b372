"""Ambiguous answers and crashes inside a side effect: reconciled on re-entry and by the sweeper (invariants 3, 4, 6).

Each downstream kind of the demo claims-agent, served by the sandbox over real HTTP:
payments honours Idempotency-Keys, tickets can be looked up, notifications can do neither.
"""
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from durable import services, tasks
from durable.downstream import REPAIRED, DownstreamOutcome
from durable.engine.ledger import Capabilities
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime import executor, sweeper
from durable.tools.demo.downstreams import NotificationsAdapter, TicketsAdapter
from durable.tools.faults import AFTER_DOWNSTREAM, AFTER_STARTED
from reconciliation.sweeper import reconcile_stale
from tests.durable.claims import advance, start_claim
from tests.durable.ledger_workflows import SimulatedCrash, crash_at, expire_lease, make_retry_due, probe

pytestmark = pytest.mark.django_db

SERVICE = {"refund": "payments", "ticket": "tickets", "notify": "notifications"}


def retry_now(run):
    make_retry_due(run)
    return advance(run)


def operation(run, action):
    return SideEffect.objects.get(run=run, action_name=action)


def effects(sandbox, action):
    return sandbox.state.calls_snapshot()[SERVICE[action]]["effects"]


def sent_with(sandbox, row):
    """How many requests carried this operation's id as their Idempotency-Key."""
    return sandbox.state.calls_snapshot()[SERVICE[row.action_name]]["calls_by_key"].get(row.operation_id, 0)


def reconciliations(run):
    return list(JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.RECONCILIATION)
                .order_by("created_at", "id").values_list("detail", flat=True))


def crash(run, monkeypatch, point, action):
    """Advance until the worker dies at `point` of `action`; its lease then runs out."""
    crash_at(monkeypatch, point, action)
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    expire_lease(run)
    run.refresh_from_db()
    return run


# Ambiguous answers: the request went out and no answer came back


@pytest.mark.parametrize("fault", ["hang", "drop_after_success"])
def test_an_ambiguous_refund_is_sent_again_with_the_same_key_and_refunds_once(demo, fault):
    demo.state.arm_fault("payments", fault)
    run = advance(start_claim())
    row = operation(run, "refund")
    assert run.status == RunStatus.WAITING_RETRY
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("ambiguous", True, "payment")
    assert (row.status, row.attempts) == (Op.STARTED, 1)  # never marked failed: it may have happened
    assert effects(demo, "refund") == (1 if fault == "drop_after_success" else 0)

    run = retry_now(run)
    row.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert (row.status, row.attempts, row.external_ref) == (Op.SUCCEEDED, 2, "re_1")
    assert effects(demo, "refund") == 1 and len(demo.state.list_refunds()) == 1
    assert sent_with(demo, row) == 2
    [decision] = reconciliations(run)
    assert (decision["decision"], decision["operation_id"]) == ("retry_same_key", row.operation_id)
    assert row.operation_id in decision["evidence"] and "Idempotency-Key" in decision["evidence"]


def test_a_ticket_whose_answer_was_lost_is_found_by_lookup_and_not_opened_again(demo):
    demo.state.arm_fault("tickets", "drop_after_success")
    run = advance(start_claim())
    assert run.status == RunStatus.WAITING_RETRY and run.error["kind"] == "ambiguous"
    assert operation(run, "ticket").status == Op.STARTED

    run = retry_now(run)
    row = operation(run, "ticket")
    [ticket] = demo.state.tickets_for("ORD-1001")
    assert run.status == RunStatus.SUCCEEDED
    assert run.output["ticket_id"] == ticket["ticket_id"] == row.external_ref
    assert (row.status, row.result_json) == (Op.SUCCEEDED, ticket)
    assert effects(demo, "ticket") == 1 and sent_with(demo, row) == 1
    [decision] = reconciliations(run)
    assert decision["decision"] == "found" and ticket["ticket_id"] in decision["evidence"]


def test_a_ticket_request_that_timed_out_without_effect_is_looked_up_then_sent_again_once(demo):
    demo.state.arm_fault("tickets", "hang")
    run = advance(start_claim())
    assert run.status == RunStatus.WAITING_RETRY and effects(demo, "ticket") == 0

    run = retry_now(run)
    row = operation(run, "ticket")
    assert run.status == RunStatus.SUCCEEDED
    assert effects(demo, "ticket") == 1 and len(demo.state.tickets_for("ORD-1001")) == 1
    assert (row.status, row.attempts, sent_with(demo, row)) == (Op.SUCCEEDED, 2, 2)
    assert [d["decision"] for d in reconciliations(run)] == ["not_found"]


def test_a_notification_whose_answer_was_lost_becomes_unknown_and_is_never_sent_again(demo, sent):
    demo.state.arm_fault("notifications", "drop_after_success")
    run = advance(start_claim())
    row = operation(run, "notify")
    assert run.status == RunStatus.NEEDS_ATTENTION
    assert (run.error["kind"], run.error["operation_id"]) == ("unknown_side_effect", row.operation_id)
    assert run.lease_owner is None and run.next_attempt_at is None
    assert (row.status, row.attempts) == (Op.UNKNOWN, 1)
    assert "no idempotency keys and no lookup" in row.last_error["evidence"]
    assert JournalEntry.objects.filter(run=run, kind="side_effect", detail__status="UNKNOWN").exists()
    assert JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.NEEDS_ATTENTION).exists()
    assert effects(demo, "notify") == 1

    # Nothing the machine does on its own sends it again or calls it failed.
    assert executor.advance(run.id).claimed is False
    assert reconcile_stale() == 0
    assert sweeper.sweep() == [] and sent == []
    run.refresh_from_db()
    row.refresh_from_db()
    assert (run.status, row.status) == (RunStatus.NEEDS_ATTENTION, Op.UNKNOWN)
    assert effects(demo, "notify") == 1 and sent_with(demo, row) == 1


def test_a_notification_that_timed_out_is_unknown_even_if_nothing_happened(demo):
    demo.state.arm_fault("notifications", "hang")
    run = advance(start_claim())
    assert run.status == RunStatus.NEEDS_ATTENTION
    assert operation(run, "notify").status == Op.UNKNOWN
    assert "timeout" in operation(run, "notify").last_error["evidence"]
    assert effects(demo, "notify") == 0


def test_a_refused_connection_is_not_ambiguous_even_for_notifications(demo, monkeypatch):
    real = NotificationsAdapter.execute
    refused = []

    def refuse_first(self, operation_id, business_key, payload):
        if not refused:
            refused.append(operation_id)
            raise httpx.ConnectError("connection refused")
        return real(self, operation_id, business_key, payload)

    monkeypatch.setattr(NotificationsAdapter, "execute", refuse_first)
    run = advance(start_claim())
    assert run.status == RunStatus.WAITING_RETRY
    assert (operation(run, "notify").status, run.error["kind"]) == (Op.FAILED_RETRYABLE, "network")

    run = retry_now(run)
    assert run.status == RunStatus.SUCCEEDED and effects(demo, "notify") == 1


# A worker that died inside the side effect: re-entry reconciles the STARTED row


@pytest.mark.parametrize("action,decision,sent_again", [
    ("refund", "retry_same_key", 1),
    ("ticket", "not_found", 1),
])
def test_a_crash_after_started_is_reconciled_and_sent_once(demo, monkeypatch, action, decision, sent_again):
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, action)
    row = operation(run, action)
    assert (run.status, row.status, row.attempts) == (RunStatus.RUNNING, Op.STARTED, 1)
    assert effects(demo, action) == 0

    run = advance(run)
    row.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert (row.status, row.attempts) == (Op.SUCCEEDED, 2)
    assert effects(demo, action) == 1 and sent_with(demo, row) == sent_again
    assert [d["decision"] for d in reconciliations(run)] == [decision]


def test_a_crash_after_started_on_notifications_becomes_unknown_with_nothing_sent(demo, monkeypatch):
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "notify")
    run = advance(run)
    row = operation(run, "notify")
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error["kind"] == "unknown_side_effect"
    assert row.status == Op.UNKNOWN
    assert effects(demo, "notify") == 0 and sent_with(demo, row) == 0
    [decision] = reconciliations(run)
    assert decision["decision"] == "unknown" and "neither honours idempotency keys nor can be looked up" in decision[
        "evidence"]


@pytest.mark.parametrize("action,decision,requests", [
    ("refund", "retry_same_key", 2),  # the sandbox answers the second request with the first refund
    ("ticket", "found", 1),  # found by lookup: not opened again
])
def test_a_crash_after_the_downstream_answered_is_reconciled_to_exactly_one_effect(demo, monkeypatch, action, decision,
                                                                                    requests):
    run = crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, action)
    assert operation(run, action).status == Op.STARTED and effects(demo, action) == 1

    run = advance(run)
    row = operation(run, action)
    assert run.status == RunStatus.SUCCEEDED
    assert row.status == Op.SUCCEEDED
    assert effects(demo, action) == 1 and sent_with(demo, row) == requests
    assert [d["decision"] for d in reconciliations(run)] == [decision]
    assert run.output[f"{action}_id"] == row.external_ref


@pytest.mark.parametrize("refusal", ["429", "503"])
def test_a_refused_resend_of_a_refund_that_may_have_happened_leaves_it_started_not_failed(demo, monkeypatch, refusal):
    # A 429 or 503 is answered before the key is looked at: it says nothing of the crashed attempt.
    run = crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, "refund")
    demo.state.arm_fault("payments", refusal)
    run = advance(run)
    row = operation(run, "refund")
    assert (run.status, run.error["retryable"]) == (RunStatus.WAITING_RETRY, True)
    assert row.status == Op.STARTED and effects(demo, "refund") == 1

    run = retry_now(run)
    row.refresh_from_db()
    assert (run.status, row.status) == (RunStatus.SUCCEEDED, Op.SUCCEEDED)
    assert effects(demo, "refund") == 1 and sent_with(demo, row) == 3
    assert [d["decision"] for d in reconciliations(run)] == ["retry_same_key", "retry_same_key"]


def test_a_refund_that_may_have_happened_and_is_refused_until_the_run_gives_up_is_unknown_never_failed(demo,
                                                                                                   monkeypatch):
    run = crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, "refund")
    demo.state.arm_fault("payments", "503", 10)
    run = advance(run)
    while run.status == RunStatus.WAITING_RETRY:
        run = retry_now(run)
    row = operation(run, "refund")
    assert (run.status, row.status) == (RunStatus.NEEDS_ATTENTION, Op.UNKNOWN)
    assert run.error["kind"] == "unknown_side_effect" and run.error["operation_id"] == row.operation_id
    assert run.error["exhausted"] is True
    assert effects(demo, "refund") == 1  # it had happened: FAILED would have said otherwise


def test_a_refused_send_after_a_lookup_found_nothing_is_known_not_to_have_happened(demo, monkeypatch):
    # The lookup is evidence: a 503 to the send that follows it leaves nothing uncertain.
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "ticket")
    look_up = TicketsAdapter.lookup

    def look_up_then_refuse_the_send(*args):
        found = look_up(*args)
        demo.state.arm_fault("tickets", "503")
        return found

    monkeypatch.setattr(TicketsAdapter, "lookup", look_up_then_refuse_the_send)
    run = advance(run)
    row = operation(run, "ticket")
    assert run.status == RunStatus.WAITING_RETRY
    assert row.status == Op.FAILED_RETRYABLE and effects(demo, "ticket") == 0


def test_a_crash_after_notifications_answered_becomes_unknown_with_the_one_effect(demo, monkeypatch):
    run = advance(crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, "notify"))
    assert run.status == RunStatus.NEEDS_ATTENTION
    assert operation(run, "notify").status == Op.UNKNOWN
    assert effects(demo, "notify") == 1


# The sweeper's reconciler: operations left STARTED while no worker holds their run


@pytest.fixture
def reconcile_at_once(settings):
    settings.DURABLE_RECONCILE_AFTER_SECONDS = 0


def sweeper_decisions(run):
    return [d for d in reconciliations(run) if d.get("by") == "sweeper"]


def test_the_sweeper_settles_a_stale_ticket_it_finds_as_succeeded(demo, monkeypatch, reconcile_at_once):
    run = crash(start_claim(), monkeypatch, AFTER_DOWNSTREAM, "ticket")
    assert reconcile_stale() == 1
    row = operation(run, "ticket")
    [ticket] = demo.state.tickets_for("ORD-1001")
    assert (row.status, row.external_ref, row.result_json) == (Op.SUCCEEDED, ticket["ticket_id"], ticket)
    [decision] = sweeper_decisions(run)
    assert (decision["decision"], decision["operation_id"]) == ("found", row.operation_id)
    assert ticket["ticket_id"] in decision["evidence"]

    run = advance(run)  # the run takes the recorded ticket
    assert run.status == RunStatus.SUCCEEDED and run.output["ticket_id"] == ticket["ticket_id"]
    assert effects(demo, "ticket") == 1 and sent_with(demo, row) == 1


def test_the_sweeper_marks_a_stale_ticket_it_cannot_find_failed_retryable_and_the_run_sends_it_once(
        demo, monkeypatch, reconcile_at_once):
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "ticket")
    assert reconcile_stale() == 1
    row = operation(run, "ticket")
    assert row.status == Op.FAILED_RETRYABLE
    [decision] = sweeper_decisions(run)
    assert decision["decision"] == "not_found" and "never happened" in decision["evidence"]

    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert effects(demo, "ticket") == 1 and len(demo.state.tickets_for("ORD-1001")) == 1


def test_the_sweeper_marks_a_stale_notification_unknown_and_the_run_needs_attention(demo, monkeypatch,
                                                                                     reconcile_at_once):
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "notify")
    assert reconcile_stale() == 1
    run.refresh_from_db()
    row = operation(run, "notify")
    assert row.status == Op.UNKNOWN
    assert run.status == RunStatus.NEEDS_ATTENTION and run.lease_owner is None
    assert (run.error["kind"], run.error["operation_id"]) == ("unknown_side_effect", row.operation_id)
    [decision] = sweeper_decisions(run)
    assert decision["decision"] == "unknown" and "neither honours idempotency keys nor can be looked up" in decision["evidence"]
    assert executor.advance(run.id).claimed is False
    assert effects(demo, "notify") == 0


def test_the_sweeper_leaves_a_stale_refund_to_the_runs_own_retry_with_the_same_key(demo, monkeypatch,
                                                                                    reconcile_at_once):
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "refund")
    assert reconcile_stale() == 0
    assert operation(run, "refund").status == Op.STARTED
    assert reconciliations(run) == []
    assert advance(run).status == RunStatus.SUCCEEDED and effects(demo, "refund") == 1


def test_the_sweeper_leaves_alone_an_operation_whose_run_holds_a_live_lease(demo, monkeypatch, reconcile_at_once):
    run = start_claim()
    crash_at(monkeypatch, AFTER_STARTED, "ticket")
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)  # the worker is (as far as anyone knows) still busy with it
    lookups = demo.state.calls_snapshot()["tickets"]["calls"]
    assert reconcile_stale() == 0
    assert operation(run, "ticket").status == Op.STARTED
    assert demo.state.calls_snapshot()["tickets"]["calls"] == lookups  # not even looked up
    assert reconciliations(run) == []


def test_the_sweeper_waits_for_the_threshold_before_reconciling(demo, monkeypatch, settings):
    settings.DURABLE_RECONCILE_AFTER_SECONDS = 300
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "notify")
    assert reconcile_stale() == 0
    assert operation(run, "notify").status == Op.STARTED


def test_a_failed_lookup_leaves_the_operation_started_and_the_sweep_goes_on(demo, monkeypatch, reconcile_at_once):
    first = crash(start_claim("ORD-1001"), monkeypatch, AFTER_STARTED, "ticket")
    second = crash(start_claim("ORD-1002"), monkeypatch, AFTER_STARTED, "notify")
    demo.state.arm_fault("tickets", "503")  # the lookup of the first (oldest) one fails

    assert reconcile_stale() == 1
    assert operation(first, "ticket").status == Op.STARTED  # to be looked up again on the next sweep
    assert operation(second, "notify").status == Op.UNKNOWN
    assert reconcile_stale() == 1
    assert operation(first, "ticket").status == Op.FAILED_RETRYABLE


def test_a_failed_lookup_does_not_stop_the_periodic_sweep_from_resending_runs(demo, monkeypatch, reconcile_at_once,
                                                                               sent, settings):
    settings.DURABLE_PENDING_GRACE_SECONDS = 0  # the run's start message is long gone
    run = crash(start_claim(), monkeypatch, AFTER_STARTED, "ticket")  # its worker died: the run must be re-sent
    Run.objects.filter(id=run.id).update(enqueued_at=timezone.now() - timedelta(minutes=5))  # sent before it ran
    demo.state.arm_fault("tickets", "503")
    tasks.sweep()
    assert sent == [run.id]
    assert operation(run, "ticket").status == Op.STARTED


def test_retries_exhausted_on_an_ambiguous_refund_leave_it_unknown_never_failed(sandbox, settings):
    # payments drops the connection after refunding, every time: the run gives up, but the
    # refund may have happened (it did, once), so the operation must be UNKNOWN, not failed.
    from durable.models import Run
    from durable.runtime import executor

    sandbox.state.arm_fault("payments", "drop_after_success", 10)
    run, _ = services.start_run(workflow="claims-agent", version=1, business_key="ORD-1001", input={
        "order_id": "ORD-1001", "customer_message": "Refund ORD-1001 please, it broke"}, allow_older_version=True)
    for _ in range(10):
        executor.advance(run.id)
        Run.objects.filter(id=run.id).update(next_attempt_at=None)
        run.refresh_from_db()
        if run.status != RunStatus.WAITING_RETRY:
            break
    refund = run.side_effects.get(action_name="refund")
    assert (run.status, refund.status) == (RunStatus.NEEDS_ATTENTION, Op.UNKNOWN)
    assert run.error["kind"] == "unknown_side_effect" and run.error["operation_id"] == refund.operation_id
    assert sandbox.state.calls_snapshot()["payments"]["effects"] == 1


def test_a_rate_limited_refund_is_not_retried_before_the_downstreams_retry_after(demo):
    """Item 19 of "Trust": a 429 with Retry-After was retried after 0.49 s."""
    demo.state.retry_after = "8"  # under the claims-agent policy's 10 s maximum
    demo.state.arm_fault("payments", "429")
    run = advance(start_claim())
    assert run.status == RunStatus.WAITING_RETRY and run.error["kind"] == "rate_limited"
    assert run.error["retry_after"] == 8.0
    assert run.next_attempt_at - run.updated_at >= timedelta(seconds=8)  # the backoff alone: about 1 s


# What a lookup finds that the database cannot store: the action happened, so it is recorded repaired


@pytest.fixture
def poisoned_lookup(monkeypatch):
    """The ledger tests' probe, looked up rather than keyed, finding an answer the database cannot store."""
    probe.reset()
    monkeypatch.setattr(probe, "capabilities", Capabilities(honours_idempotency_keys=False, can_lookup=True))
    monkeypatch.setattr(probe, "lookup", lambda operation_id, business_key, payload: DownstreamOutcome(
        "ch_\x001", {"note": "paid\x00", "by": "an LLM wrote \ud800", "fee": float("inf")}))
    yield probe
    probe.reset()


@pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight, as in production
@pytest.mark.parametrize("settled_by", ["worker", "sweeper"])
def test_an_answer_found_by_lookup_that_the_database_cannot_store_is_recorded_repaired(
        poisoned_lookup, monkeypatch, reconcile_at_once, settled_by):
    started, _ = services.start_run(workflow="test-ledger-probe", input={}, business_key="B-1")
    run = crash(started, monkeypatch, AFTER_DOWNSTREAM, "charge")
    if settled_by == "sweeper":
        assert reconcile_stale() == 1
    run = advance(run)
    row = operation(run, "charge")
    stored = {"note": "paid\ufffd", "by": "an LLM wrote \ufffd", "fee": None}
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert (row.status, row.external_ref, row.result_json) == (Op.SUCCEEDED, "ch_\ufffd1", stored)
    assert run.output["charge"] == {**stored, "external_ref": "ch_\ufffd1"}
    [decision] = reconciliations(run)
    assert decision["decision"] == "found" and "ch_\ufffd1" in decision["evidence"]
    success = [e.detail for e in JournalEntry.objects.filter(run=run, kind="side_effect")
               if e.detail["status"] == Op.SUCCEEDED]
    said = decision["evidence"] if settled_by == "sweeper" else success[0]["evidence"]
    assert REPAIRED in said
    assert len(poisoned_lookup.calls) == 1  # found, so never sent again
