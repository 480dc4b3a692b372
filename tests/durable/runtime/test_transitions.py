"""The one door for a run's state (durable/runtime/transitions.py): every move outside the worker's
lease is checked against the state table, is one conditional UPDATE, and sends a run made PENDING after commit."""
from __future__ import annotations

import uuid

import pytest
from django.db.models import Q
from django.utils import timezone

from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import IllegalTransition, RunStatus
from durable.models import Checkpoint, Run, SideEffect
from durable.runtime import dispatch, transitions

pytestmark = pytest.mark.django_db


def new_run(**fields) -> Run:
    """A run of no registered workflow: the door does not need one."""
    return transitions.start(workflow_name="door", workflow_version=1, checkpoint_schema_version=1,
                             topology_fingerprint="f" * 64, business_key=f"B-{uuid.uuid4().hex[:8]}", input={},
                             next_step="first", state={"n": 0}, schema_version=1, enqueue=False, **fields)


def row_of(run: Run) -> tuple:
    return Run.objects.values_list("status", "fencing_token", "updated_at", "error").get(id=run.id)


@pytest.fixture
def sent(monkeypatch) -> list[str]:
    """The runs sent to a worker (by dispatch.enqueue), in order."""
    sent: list[str] = []
    monkeypatch.setattr(dispatch, "enqueue", lambda run_id, **_: sent.append(str(run_id)))
    return sent


def test_a_run_starts_pending_with_its_first_checkpoint_and_is_sent_once_that_commits(
        sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run = transitions.start(workflow_name="door", workflow_version=1, checkpoint_schema_version=1,
                                topology_fingerprint="f" * 64, business_key="B-1", input={}, next_step="first",
                                state={"n": 0}, schema_version=1)
        assert sent == []  # not before the commit
    assert (run.status, run.current_step) == (RunStatus.PENDING, "first")
    assert list(Checkpoint.objects.filter(run=run).values_list("seq", "step", "next_step", "state")) == [
        (0, "", "first", {"n": 0})]
    assert sent == [str(run.id)]


def test_a_move_the_table_forbids_raises_and_changes_nothing(sent, django_capture_on_commit_callbacks):
    run = new_run()
    before = row_of(run)
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(IllegalTransition) as refused:
        transitions.move(run.id, RunStatus.WAITING, sources={RunStatus.PENDING})
    assert "a run that is PENDING cannot move to WAITING" in str(refused.value)
    assert row_of(run) == before and sent == []


def test_a_move_from_a_status_the_run_left_meanwhile_moves_nothing(sent, django_capture_on_commit_callbacks):
    run = new_run()
    with django_capture_on_commit_callbacks(execute=True):
        assert transitions.move(run.id, RunStatus.PENDING, sources={RunStatus.WAITING}) is False
    assert row_of(run)[0] == RunStatus.PENDING and sent == []


def test_a_move_is_fenced_on_the_token_the_caller_read(sent, django_capture_on_commit_callbacks):
    run = new_run()
    with django_capture_on_commit_callbacks(execute=True):
        assert not transitions.move(run.id, RunStatus.CANCELLED, token=run.fencing_token + 1)
        assert transitions.move(run.id, RunStatus.CANCELLED, token=run.fencing_token, where=Q(current_step="first"))
    assert row_of(run)[0] == RunStatus.CANCELLED and sent == []  # only a run made PENDING is sent


def test_a_run_made_pending_is_sent_after_the_commit_and_not_before(sent, django_capture_on_commit_callbacks):
    run = new_run()
    Run.objects.filter(id=run.id).update(status=RunStatus.WAITING)  # as the store parks it
    with django_capture_on_commit_callbacks(execute=True):
        assert transitions.move(run.id, RunStatus.PENDING, sources={RunStatus.WAITING}, next_attempt_at=None)
        assert sent == []
    assert sent == [str(run.id)]


def test_a_migration_moves_the_blocked_run_with_its_checkpoint_and_approvals_can_tell(sent):
    run = new_run()
    Run.objects.filter(id=run.id).update(status=RunStatus.BLOCKED_VERSION)
    now = timezone.now()
    assert not transitions.migrate(run.id, seq=5, from_version=1, to_version=2, next_step="second",
                                   state={"n": 1}, schema_version=2, now=now)  # its checkpoint moved meanwhile
    assert not Checkpoint.objects.filter(run=run, seq=1).exists()
    assert transitions.migrate(run.id, seq=0, from_version=1, to_version=2, next_step="second", state={"n": 1},
                               schema_version=2, now=now, workflow_version=2)
    run.refresh_from_db()
    assert (run.status, run.workflow_version, run.checkpoint_seq, run.current_step) == (
        RunStatus.PENDING, 2, 1, "second")
    assert Checkpoint.objects.get(run=run, seq=1).step == "migration v1->v2"
    assert transitions.taken_over_by_migration(run.id, 0, 1, "second")
    assert not transitions.taken_over_by_migration(run.id, 1, 1, "second")  # none since that visit


def test_a_migration_of_a_run_that_is_not_blocked_is_refused_by_the_table():
    run = new_run()
    with pytest.raises(IllegalTransition):
        transitions.move(run.id, RunStatus.BLOCKED_VERSION, sources={RunStatus.PENDING})


def operation(run: Run, name: str, status: Op) -> SideEffect:
    return SideEffect.objects.create(operation_id=uuid.uuid4().hex, run=run, step="first", action_name=name,
                                     business_key=run.business_key, downstream="nowhere", request_hash="h",
                                     status=status)


def test_the_sweepers_hold_names_every_unknown_operation_of_the_run():
    run = new_run()
    unknown = [operation(run, f"notify_{n}", Op.UNKNOWN).operation_id for n in range(3)]
    operation(run, "refund", Op.SUCCEEDED)
    error = {"kind": "unknown_side_effect", "operation_id": unknown[0], "message": "the first one is UNKNOWN."}
    held = transitions.needs_attention(run.id, error, sources={RunStatus.PENDING}, token=run.fencing_token)
    run.refresh_from_db()
    assert run.status == RunStatus.NEEDS_ATTENTION and run.error == held
    assert sorted(held["operation_ids"]) == sorted(unknown) and held["operation_id"] == unknown[0]
    assert "All 3 operations of the run that are UNKNOWN" in held["message"]
    assert all(operation_id in held["message"] for operation_id in unknown)
    assert transitions.needs_attention(run.id, error, sources={RunStatus.PENDING}, token=run.fencing_token) is None
