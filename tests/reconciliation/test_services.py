"""An operator settles an UNKNOWN operation (invariant 4); the run then continues from its checkpoint."""
import pytest

from durable.engine.ids import canonical_json, sha256_hex
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import JournalEntry, SideEffect
from reconciliation.services import resolve_operation
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.claims import advance, needs_attention

pytestmark = pytest.mark.django_db

SENT = {"notification_id": "ntf-1", "status": "sent"}


@pytest.fixture
def resolver(db):
    return make_user("resolver", "durable.resolve_sideeffect", "durable.view_sideeffect")


def resolve(row, user, **fields):
    fields.setdefault("reason", "checked the notifications provider's outbox")
    return resolve_operation(operation_id=row.operation_id, user=user, source="test", **fields)


def calls(sandbox, service):
    return sandbox.state.calls_snapshot()[service]


# Resolved as succeeded


def test_a_succeeded_resolution_records_the_ref_and_result_and_puts_the_run_back_to_pending(demo, resolver):
    run, row = needs_attention(demo)
    resolved = resolve(row, resolver, outcome="succeeded", external_ref="ntf-1", result=SENT)
    run.refresh_from_db()
    assert (resolved.status, resolved.external_ref, resolved.result_json) == (Op.SUCCEEDED, "ntf-1", SENT)
    assert resolved.response_hash == sha256_hex(canonical_json(SENT))
    assert resolved.resolved_by == resolver
    assert resolved.resolution_evidence == "checked the notifications provider's outbox"
    assert resolved.resolved_at is not None
    assert (run.status, run.error) == (RunStatus.PENDING, None)


def test_after_a_succeeded_resolution_the_run_continues_from_its_checkpoint_without_sending_again(demo, resolver):
    run, row = needs_attention(demo)
    checkpoints_before = run.checkpoint_seq
    resolve(row, resolver, outcome="succeeded", external_ref="ntf-1", result=SENT)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output["notification_id"] == "ntf-1"  # what the operator recorded is what the step got
    assert run.checkpoint_seq == checkpoints_before + 1  # only the notify step ran
    assert calls(demo, "notifications")["calls_by_key"] == {row.operation_id: 1}
    assert calls(demo, "notifications")["effects"] == 1
    assert [calls(demo, s)["calls"] for s in ("orders", "payments")] == [1, 1]
    assert SideEffect.objects.get(pk=row.pk).duplicates_prevented == 0  # the operator's answer, taken: no duplicate
    assert not run.journal.filter(kind="duplicate_prevented").exists()


def test_a_succeeded_resolution_without_a_result_records_an_empty_one(demo, resolver):
    run, row = needs_attention(demo)
    resolved = resolve(row, resolver, outcome="succeeded", external_ref="ntf-1")
    assert (resolved.status, resolved.external_ref, resolved.result_json) == (Op.SUCCEEDED, "ntf-1", {})
    assert advance(run).status == RunStatus.SUCCEEDED
    assert calls(demo, "notifications")["effects"] == 1


# Resolved as did not happen


def test_did_not_happen_with_retry_sends_it_once_more_with_the_same_key(demo, resolver):
    run, row = needs_attention(demo, fault="hang")
    assert calls(demo, "notifications")["effects"] == 0
    resolved = resolve(row, resolver, outcome="did_not_happen", follow_up="retry", reason="not in the outbox")
    assert resolved.status == Op.FAILED_RETRYABLE
    run = advance(run)
    row.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert (row.status, row.attempts) == (Op.SUCCEEDED, 2)
    assert calls(demo, "notifications")["effects"] == 1
    assert calls(demo, "notifications")["calls_by_key"] == {row.operation_id: 2}  # the lost one and the resend
    assert run.output["notification_id"] == row.external_ref
    assert not row.status_set_by_operator  # the machine sent and committed it: a re-entry would be a duplicate


def test_did_not_happen_with_fail_fails_the_step_and_the_run_without_sending(demo, resolver):
    run, row = needs_attention(demo, fault="hang")
    resolved = resolve(row, resolver, outcome="did_not_happen", follow_up="fail", reason="customer unsubscribed")
    assert resolved.status == Op.FAILED_FINAL
    run = advance(run)
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["step"]) == ("side_effect_failed", "notify")
    assert calls(demo, "notifications")["calls"] == 1 and calls(demo, "notifications")["effects"] == 0


# Refusals


def test_only_an_unknown_operation_is_resolved_by_hand(demo, resolver):
    run, _ = needs_attention(demo)
    refund = SideEffect.objects.get(run=run, action_name="refund")
    with pytest.raises(Conflict) as refused:
        resolve(refund, resolver, outcome="did_not_happen", follow_up="retry")
    assert refused.value.current == Op.SUCCEEDED
    assert "not UNKNOWN" in str(refused.value)
    assert SideEffect.objects.get(pk=refund.pk).status == Op.SUCCEEDED
    assert not operator_actions().exists()


def test_an_operation_is_resolved_once(demo, resolver):
    _, row = needs_attention(demo)
    resolve(row, resolver, outcome="succeeded", external_ref="ntf-1")
    with pytest.raises(Conflict) as refused:
        resolve(row, resolver, outcome="did_not_happen", follow_up="fail")
    assert refused.value.current == Op.SUCCEEDED
    assert operator_actions().count() == 1


@pytest.mark.parametrize("fields,field", [
    ({"outcome": "succeeded"}, "external_ref"),
    ({"outcome": "succeeded", "external_ref": "   "}, "external_ref"),
    ({"outcome": "did_not_happen"}, "follow_up"),
    ({"outcome": "did_not_happen", "follow_up": "later"}, "follow_up"),
    ({"outcome": "succeeded", "external_ref": "ntf-1", "reason": " "}, "reason"),
    ({"outcome": "maybe"}, "outcome"),
])
def test_a_resolution_without_what_it_needs_is_refused_naming_the_field(demo, resolver, fields, field):
    run, row = needs_attention(demo)
    with pytest.raises(InvalidInput) as refused:
        resolve(row, resolver, **fields)
    assert field in refused.value.errors
    assert SideEffect.objects.get(pk=row.pk).status == Op.UNKNOWN
    run.refresh_from_db()
    assert run.status == RunStatus.NEEDS_ATTENTION and not operator_actions().exists()


def test_an_unknown_operation_id_is_not_found(resolver):
    with pytest.raises(SideEffect.DoesNotExist):
        resolve_operation(operation_id="0" * 32, user=resolver, outcome="succeeded", external_ref="x",
                          reason="r", source="test")


# The audit trail


def test_a_resolution_is_audited_with_who_why_and_the_status_before_and_after(demo, resolver):
    run, row = needs_attention(demo)
    resolve(row, resolver, outcome="succeeded", external_ref="ntf-1", result=SENT, reason="seen in the outbox")
    action = operator_actions().get()
    assert (action.action, action.operation_id, action.run_id, action.actor, action.source) == (
        "resolve_operation", row.operation_id, run.id, resolver, "test")
    assert (action.status_before, action.status_after, action.reason) == ("UNKNOWN", "SUCCEEDED", "seen in the outbox")
    assert action.detail["external_ref"] == "ntf-1" and action.detail["outcome"] == "succeeded"
    entry = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.OPERATOR)
    assert (entry.step, entry.name) == ("notify", "notify")
    assert entry.detail["by"] == "resolver" and entry.detail["reason"] == "seen in the outbox"
    assert (entry.detail["operation_id"], entry.detail["status_after"]) == (row.operation_id, "SUCCEEDED")


# The run's continuation


def test_the_run_resumes_only_when_none_of_its_operations_is_unknown(demo, resolver, sent,
                                                                      django_capture_on_commit_callbacks):
    run, notify = needs_attention(demo)
    ticket = SideEffect.objects.get(run=run, action_name="ticket")
    SideEffect.objects.filter(pk=ticket.pk).update(status=Op.UNKNOWN)  # a second doubtful operation of the run

    with django_capture_on_commit_callbacks(execute=True):
        resolve(notify, resolver, outcome="succeeded", external_ref="ntf-1")
    run.refresh_from_db()
    assert run.status == RunStatus.NEEDS_ATTENTION and sent == []

    with django_capture_on_commit_callbacks(execute=True):
        resolve(ticket, resolver, outcome="succeeded", external_ref=ticket.external_ref, result=ticket.result_json)
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    assert sent == [run.id]  # handed to a worker once the resolution is committed


def test_a_resolution_enqueues_nothing_before_it_is_committed(demo, resolver, sent,
                                                                django_capture_on_commit_callbacks):
    _, row = needs_attention(demo)
    with django_capture_on_commit_callbacks() as callbacks:
        resolve(row, resolver, outcome="succeeded", external_ref="ntf-1")
    assert sent == [] and len(callbacks) == 1
