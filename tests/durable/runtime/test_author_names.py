"""The names a step catches (docs/workflows.md, "Errors a step may catch"), caught in a step and handled there: a
precondition that fails when an approval is asked, a child key another run holds, and an event's payload read as
the model its workflow declares. Each answer is the same when the visit runs again (a retry), whatever holds then."""
from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from durable import ChildKeyTaken, ChildRunFailed, send_event, services
from durable.engine.errors import ApprovalNotGranted, ApprovalPreconditionFailed, NonRetryableError, classify
from durable.engine.states import RunStatus
from durable.models import Run
from durable.replay_records import from_database
from durable.replayer import RunReplay, replay_run
from durable.store.checkpoints import state_at
from tests.durable.claims import advance, make_retry_due

pytestmark = pytest.mark.django_db


def start(workflow: str, tmp_path, key: str = "A-1", **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"marker": str(tmp_path / "marker"), **given},
                                business_key=key)
    return run


def last_state(run: Run) -> dict:
    return state_at(run.id, run.checkpoints.order_by("-seq").values_list("seq", flat=True).first())


def replayed(run: Run) -> RunReplay:
    return replay_run(next(from_database(Run.objects.filter(id=run.id))))


def retried(run: Run) -> Run:
    """The step failed once after it answered: its retry runs the same visit again."""
    assert run.status == RunStatus.WAITING_RETRY and run.error["kind"] == "transient", run.error
    make_retry_due(run)
    return advance(run)


def test_a_precondition_failing_when_the_approval_is_asked_is_the_steps_to_answer_and_stays_its_answer(tmp_path):
    facts = tmp_path / "facts"
    facts.write_text("already refunded")
    run = advance(start("test-author-approval", tmp_path, facts=str(facts), fail_once=True))
    facts.write_text("ok")  # the facts hold now; the visit that was refused is refused again, as recorded
    run = retried(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert last_state(run)["answer"] == "refused: the order is already refunded"
    assert not ApprovalRequest.objects.filter(run=run).exists()  # nobody was asked
    assert replayed(run).ok, replayed(run)  # durable_replay answers it as the worker did: no false difference


def test_a_failed_precondition_is_an_approval_not_granted_and_not_retryable():
    refused = ApprovalPreconditionFailed("refund", ("the order is closed",))
    assert isinstance(refused, ApprovalNotGranted) and classify(refused).kind == "precondition_failed"
    assert not classify(refused).retryable


def test_a_child_key_another_run_holds_is_a_child_run_failed_the_step_may_catch_and_it_stays_caught(tmp_path):
    holder, _ = services.start_run(workflow="test-child", input={"value": 7, "waits": True}, business_key="ORD-9")
    assert advance(holder).status == RunStatus.WAITING  # active: it holds the key
    run = advance(start("test-author-parent", tmp_path, child_key="ORD-9", fail_once=True))
    send_event(run_id=holder.id, name="go")
    assert advance(holder).status == RunStatus.SUCCEEDED  # the key is free now; the refusal was recorded
    run = retried(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert last_state(run)["answer"] == f"taken by {holder.id}"
    assert not Run.objects.filter(parent_run=run).exists()
    assert replayed(run).ok, replayed(run)


def test_a_child_key_taken_is_named_and_classified_as_the_docs_say():
    taken = ChildKeyTaken("fraud-check", "ORD-9", "run-1", "child run of fraud-check not started: ...")
    assert isinstance(taken, ChildRunFailed) and isinstance(taken, NonRetryableError)
    assert (taken.holder, taken.business_key, taken.workflow, taken.status) == ("run-1", "ORD-9", "fraud-check",
                                                                                 "NOT_STARTED")
    assert classify(taken).kind == "child_not_started" and not classify(taken).retryable


def test_an_events_payload_comes_back_as_the_model_its_workflow_declares_live_and_on_replay(tmp_path):
    run = advance(start("test-author-event", tmp_path, fail_once=True))
    assert run.status == RunStatus.WAITING
    send_event(run_id=run.id, name="rated", payload={"text": "quick refund", "stars": 5})
    run = advance(run)  # live: the wait takes the event, then the step fails once
    run = retried(run)  # replay: the wait returns what it recorded
    assert run.status == RunStatus.SUCCEEDED, run.error
    state = last_state(run)
    assert (state["payload_type"], state["answer"]) == ("Rating", "quick refund (5)")
