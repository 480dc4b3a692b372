"""A code change never ends a run FAILED by itself (issue 40, docs/replay-contract.md): a re-executed visit that asks
for a side effect with another request than it recorded holds the run in BLOCKED_VERSION with the difference shown;
nothing is sent, and once the code asks what it recorded again an operator's resume takes the run on."""
import pytest

from durable import send_event, services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from tests.durable.claims import advance
from tests.durable.ledger_workflows import probe
from tests.durable.replay_workflows import FIRST_SUBJECT, REWORDED_SUBJECT, deploy, first_deploy  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("first_deploy")]


def waiting_for_the_reply(**given) -> Run:
    run, _ = services.start_run(workflow="test-reply-email", input=given, business_key="T-1")
    run = advance(run)
    assert run.status == RunStatus.WAITING and len(probe.calls) == 1, run.error
    return run


def reply(run: Run) -> Run:
    assert send_event(run_id=run.id, name="reply", payload={"text": "thanks"}).woke
    return advance(run)


def test_a_reworded_email_subject_while_the_run_waits_holds_the_run_showing_both_subjects():
    run = waiting_for_the_reply()
    deploy(subject=REWORDED_SUBJECT)  # the developer rewords the subject and restarts the workers
    run = reply(run)
    assert run.status == RunStatus.BLOCKED_VERSION, run.error
    assert run.error["kind"] == "replay_violation"
    mismatch = run.error["mismatch"]
    assert (mismatch["step"], mismatch["visit"], mismatch["what"]) == ("ask_customer", 0, "side_effect")
    assert mismatch["call"] == "side effect 'send_email' for T-1:ask"
    assert mismatch["recorded"] == {"subject": FIRST_SUBJECT} and mismatch["new"] == {"subject": REWORDED_SUBJECT}
    assert FIRST_SUBJECT in run.error["message"] and REWORDED_SUBJECT in run.error["message"]
    assert len(probe.calls) == 1  # nothing sent again, nothing sent with the new text
    assert SideEffect.objects.get(run=run).status == Op.SUCCEEDED
    assert JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.REPLAY_VIOLATION).count() == 1
    assert not JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.FAILED).exists()


def test_fixing_the_code_and_resuming_the_held_run_finishes_it_without_sending_again():
    run = waiting_for_the_reply()
    deploy(subject=REWORDED_SUBJECT)
    run = reply(run)
    deploy()  # the text is put back (or the change guarded by ctx.patched)
    services.resume_run(run_id=run.id, user=None, source="test", reason="subject restored")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["reply"] == {"text": "thanks"}  # the event consumed before the hold is the one it recorded
    assert len(probe.calls) == 1
    assert SideEffect.objects.get(run=run).duplicates_prevented == 1


def test_a_step_that_swallows_the_mismatch_is_held_all_the_same():
    run = waiting_for_the_reply(swallow_errors=True)
    deploy(subject=REWORDED_SUBJECT)
    run = reply(run)
    assert run.status == RunStatus.BLOCKED_VERSION, run.error
    assert run.error["mismatch"]["new"] == {"subject": REWORDED_SUBJECT}
    assert run.checkpoint_seq == 0  # the visit's new state was not written
    assert len(probe.calls) == 1


def test_the_same_email_asked_twice_in_one_execution_is_still_a_conflict_the_step_catches():
    run = waiting_for_the_reply(ask_twice=True)  # asked again with "Re: ..." in the visit's first execution
    run = reply(run)  # ...and in its second: the first ask matches its record, the second is the same conflict
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert len(probe.calls) == 1
    # the state is the second execution's (the first one's was never checkpointed): told once, by the conflict
    assert [told.endswith("a changed request needs a new business key") for told in run.output["told"]] == [True]
