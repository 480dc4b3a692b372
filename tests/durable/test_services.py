"""Run operations shared by the API, the console and commands: starting runs and steering them."""
from datetime import timedelta

import pytest
from django.utils import timezone

from durable import services
from durable.engine.states import TERMINAL, RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import Checkpoint, OperatorAction, Run
from durable.tools.demo.claims_agent import claims_agent_v2 as claims_agent
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable import workflows

pytestmark = pytest.mark.django_db

CLAIM = {"order_id": "ORD-1001", "customer_message": "Please refund ORD-1001, it arrived broken."}
NOT_TERMINAL = sorted(set(RunStatus) - TERMINAL)


def start_claim(**overrides):
    kwargs = {"workflow": "claims-agent", "input": CLAIM, "business_key": "ORD-1001", **overrides}
    return services.start_run(**kwargs)


def run_in(status, **fields):
    """A started run moved straight into `status` (as a worker or an earlier action would have left it)."""
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="k")
    Run.objects.filter(id=run.id).update(status=status, **fields)
    run.refresh_from_db()
    return run




# start_run


def test_start_run_creates_a_pending_run_and_checkpoint_zero_with_the_initial_state(calls_file):
    run, created = services.start_run(workflow="test-counting", input={"calls_file": calls_file}, business_key="b-1")
    assert created is True
    run.refresh_from_db()
    assert (run.status, run.current_step, run.checkpoint_seq, run.business_key) == (RunStatus.PENDING, "s1", 0, "b-1")
    assert run.input == {"calls_file": calls_file, "steps": 3, "hold_file": "", "fail_times": 0,
                         "fail_kind": "retryable"}  # validated, defaults filled in
    checkpoint = Checkpoint.objects.get(run=run)
    assert (checkpoint.seq, checkpoint.step, checkpoint.next_step) == (0, "", "s1")
    assert checkpoint.state == {**run.input, "values": []}
    assert checkpoint.state_schema_version == workflows.counting.checkpoint_schema_version
    assert run.enqueued_at is not None


def test_start_run_records_the_replay_contract_of_the_newest_version():
    run, _ = start_claim()
    run.refresh_from_db()
    assert run.workflow_name == "claims-agent" and run.workflow_version == claims_agent.version
    assert (run.checkpoint_schema_version, run.tool_catalog_version, run.prompt_release, run.model_policy_version) == (
        1, "tools-2026.11", "claims-planner-3", "policy-1")
    assert run.topology_fingerprint == claims_agent.fingerprint


def test_start_run_remembers_who_started_it():
    user = make_user("starter", "durable.start_run")
    run, _ = start_claim(user=user)
    assert run.created_by == user


def test_start_run_enqueues_the_run_only_once_the_transaction_commits(django_capture_on_commit_callbacks, sent):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run, _ = start_claim()
        assert sent == []  # nothing goes to the broker before the run is committed
    for callback in callbacks:
        callback()
    assert sent == [run.id]


def test_unknown_workflow_is_invalid_input_naming_the_workflow():
    with pytest.raises(InvalidInput) as exc:
        services.start_run(workflow="no-such-workflow", input={}, business_key="k")
    assert list(exc.value.errors) == ["workflow"]
    assert "no-such-workflow" in exc.value.errors["workflow"][0]
    assert Run.objects.count() == 0


def test_bad_input_is_invalid_input_with_field_errors_and_writes_nothing():
    with pytest.raises(InvalidInput) as exc:
        start_claim(input={"order_id": "1001", "customer_message": ""})
    errors = exc.value.errors["input"]
    assert set(errors) == {"order_id", "customer_message"}
    assert "pattern" in errors["order_id"][0]
    assert (Run.objects.count(), Checkpoint.objects.count()) == (0, 0)


def test_missing_input_field_is_named_in_the_errors():
    with pytest.raises(InvalidInput) as exc:
        start_claim(input={"order_id": "ORD-1"})
    assert list(exc.value.errors["input"]) == ["customer_message"]
    assert Run.objects.count() == 0



@pytest.mark.parametrize("note, problem", [("a\x00b", "NUL"), ("an LLM wrote \ud800", "lone surrogate")])
def test_input_the_database_cannot_store_is_invalid_input_naming_the_field_and_writes_nothing(note, problem):
    # The API's fields refuse it already; a caller in Python (a host app, another workflow) gets the same answer.
    with pytest.raises(InvalidInput) as exc:
        services.start_run(workflow="test-customer-order", business_key="c-1",
                           input={"customer_email": "ada@example.com", "order_id": "ORD-1", "note": note})
    [message] = exc.value.errors["input"]["note"]
    assert problem in message
    assert (Run.objects.count(), Checkpoint.objects.count()) == (0, 0)


def test_a_business_key_the_database_cannot_store_is_invalid_input():
    with pytest.raises(InvalidInput) as exc:
        services.start_run(workflow="test-trivial", input={}, business_key="ORD-\x00")
    assert list(exc.value.errors) == ["business_key"] and "NUL" in exc.value.errors["business_key"][0]
    assert Run.objects.count() == 0

def test_the_same_request_with_the_same_idempotency_key_returns_the_first_run():
    first, created_first = start_claim(idempotency_key="req-1")
    again, created_again = start_claim(idempotency_key="req-1")
    assert (created_first, created_again) == (True, False)
    assert again.id == first.id
    assert (Run.objects.count(), Checkpoint.objects.count()) == (1, 1)


def test_the_same_idempotency_key_for_a_different_request_is_a_conflict():
    first, _ = start_claim(idempotency_key="req-1")
    with pytest.raises(Conflict) as exc:
        start_claim(idempotency_key="req-1", business_key="another-key")
    assert exc.value.current == RunStatus.PENDING
    assert str(first.id) in str(exc.value)
    with pytest.raises(Conflict):
        start_claim(idempotency_key="req-1", input={**CLAIM, "customer_message": "something else"})
    assert Run.objects.count() == 1


def test_without_an_idempotency_key_a_start_another_workflow_starts_a_new_run_for_every_request():
    """test-trivial declares on_active_business_key=start_another; the claims agent returns the active run
    (tests/durable/test_active_business_key.py)."""
    run_in(RunStatus.PENDING)
    run_in(RunStatus.PENDING)
    assert Run.objects.count() == 2


# cancel


@pytest.mark.parametrize("status", NOT_TERMINAL)
def test_cancel_is_allowed_from_every_status_that_has_not_ended(status):
    run = run_in(status)
    cancelled = services.cancel_run(run_id=run.id, user=None, source="test").run
    assert cancelled.status == RunStatus.CANCELLED
    assert cancelled.finished_at is not None


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_cancel_of_an_ended_run_is_a_conflict_naming_its_status(status):
    run = run_in(status)
    with pytest.raises(Conflict) as exc:
        services.cancel_run(run_id=run.id, user=None, source="test")
    assert exc.value.current == status
    assert status in str(exc.value)
    run.refresh_from_db()
    assert run.status == status
    assert not operator_actions().exists()


def test_cancel_bumps_the_fencing_token_and_clears_the_lease():
    run = run_in(RunStatus.RUNNING, lease_owner="worker-1", fencing_token=5,
                 lease_expires_at=timezone.now() + timedelta(minutes=1))
    cancelled = services.cancel_run(run_id=run.id, user=None, source="test").run
    assert (cancelled.fencing_token, cancelled.lease_owner, cancelled.lease_expires_at) == (6, None, None)


def test_cancel_of_a_waiting_retry_drops_its_next_attempt():
    run = run_in(RunStatus.WAITING_RETRY, next_attempt_at=timezone.now() + timedelta(minutes=1))
    assert services.cancel_run(run_id=run.id, user=None, source="test").run.next_attempt_at is None


def test_cancel_writes_an_audit_row_with_who_where_why_and_the_status_before_and_after():
    operator = make_user("op", "durable.cancel_run")
    run = run_in(RunStatus.WAITING_APPROVAL)
    services.cancel_run(run_id=run.id, user=operator, source="console", reason="customer withdrew the claim")
    action = operator_actions().get(run=run)
    assert (action.actor, action.action, action.source, action.reason) == (
        operator, "cancel", "console", "customer withdrew the claim")
    assert (action.status_before, action.status_after) == (RunStatus.WAITING_APPROVAL, RunStatus.CANCELLED)


def test_a_transition_whose_audit_row_cannot_be_written_changes_nothing(monkeypatch):
    run = run_in(RunStatus.RUNNING, lease_owner="worker-1", fencing_token=5)

    def audit_fails(**kwargs):
        raise RuntimeError("audit table unavailable")

    monkeypatch.setattr(OperatorAction.objects, "create", audit_fails)
    with pytest.raises(RuntimeError):
        services.cancel_run(run_id=run.id, user=None, source="test")
    run.refresh_from_db()
    assert (run.status, run.fencing_token, run.lease_owner) == (RunStatus.RUNNING, 5, "worker-1")


def test_cancel_of_an_unknown_run_says_it_does_not_exist():
    with pytest.raises(Run.DoesNotExist):
        services.cancel_run(run_id="00000000-0000-0000-0000-000000000000", user=None, source="test")


# retry


@pytest.mark.parametrize("status", [RunStatus.WAITING_RETRY, RunStatus.FAILED])
def test_retry_makes_a_waiting_or_failed_run_pending_again_from_scratch_attempts(status):
    run = run_in(status, attempt=3, error={"kind": "transient"}, finished_at=timezone.now(),
                 next_attempt_at=timezone.now() + timedelta(minutes=5))
    retried = services.retry_run(run_id=run.id, user=None, source="test")
    assert retried.status == RunStatus.PENDING
    assert (retried.attempt, retried.error, retried.next_attempt_at, retried.finished_at) == (0, None, None, None)
    action = operator_actions().get(run=run)
    assert (action.action, action.status_before, action.status_after) == ("retry", status, RunStatus.PENDING)


@pytest.mark.parametrize("status", sorted(set(RunStatus) - {RunStatus.WAITING_RETRY, RunStatus.FAILED}))
def test_retry_from_any_other_status_is_a_conflict_naming_it(status):
    run = run_in(status)
    with pytest.raises(Conflict) as exc:
        services.retry_run(run_id=run.id, user=None, source="test")
    assert exc.value.current == status and status in str(exc.value)
    assert Run.objects.get(id=run.id).status == status
    assert not operator_actions().exists()


def test_retry_enqueues_the_run_once_the_transaction_commits(django_capture_on_commit_callbacks, sent):
    run = run_in(RunStatus.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        services.retry_run(run_id=run.id, user=None, source="test")
        assert sent == []
    assert sent == [run.id]


# resume


def test_resume_makes_a_blocked_run_pending_and_clears_its_error():
    operator = make_user("op", "durable.resume_run")
    run = run_in(RunStatus.BLOCKED_VERSION, error={"kind": "version_missing"})
    resumed = services.resume_run(run_id=run.id, user=operator, source="api", reason="v2 deployed")
    assert (resumed.status, resumed.error) == (RunStatus.PENDING, None)
    action = operator_actions().get(run=run)
    assert (action.actor, action.action, action.source, action.reason) == (operator, "resume", "api", "v2 deployed")
    assert (action.status_before, action.status_after) == (RunStatus.BLOCKED_VERSION, RunStatus.PENDING)


@pytest.mark.parametrize("status", sorted(set(RunStatus) - {RunStatus.BLOCKED_VERSION}))
def test_resume_from_any_other_status_is_a_conflict_naming_it(status):
    run = run_in(status)
    with pytest.raises(Conflict) as exc:
        services.resume_run(run_id=run.id, user=None, source="test")
    assert exc.value.current == status and status in str(exc.value)
    assert not operator_actions().exists()


def test_resume_enqueues_the_run_once_the_transaction_commits(django_capture_on_commit_callbacks, sent):
    run = run_in(RunStatus.BLOCKED_VERSION)
    with django_capture_on_commit_callbacks(execute=True):
        services.resume_run(run_id=run.id, user=None, source="test")
    assert sent == [run.id]
