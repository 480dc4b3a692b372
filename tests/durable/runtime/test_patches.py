"""ctx.patched (issue 40, part 4; docs/workflow-versions.md, "Patches"): a run that waited since before the deploy
takes the old branch and finishes; a run that reaches the patch on the new code takes the new one; each answer is
journaled so the visit run again, and durable_replay, answer the same; durable_versions lists what runs depend on."""
from io import StringIO

import pytest
from django.core.management import call_command

from durable import send_event, services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run
from durable.replay_records import from_database
from durable.replayer import replay_run
from tests.durable.claims import advance
from tests.durable.ledger_workflows import probe
from tests.durable.replay_workflows import FIRST_SUBJECT, REWORDED_SUBJECT, deploy, first_deploy  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("first_deploy")]
PATCH = "friendlier-subject"


def waiting_for_the_reply(key: str) -> Run:
    run, _ = services.start_run(workflow="test-reply-email", input={"ticket": key}, business_key=key)
    run = advance(run)
    assert run.status == RunStatus.WAITING, run.error
    return run


def replied(run: Run) -> Run:
    assert send_event(run_id=run.id, name="reply", payload={"text": "thanks"}).woke
    return advance(run)


def answers(run: Run) -> list[tuple[str, int | None, str, bool]]:
    return [(e.step, e.visit, e.name, e.detail["patched"])
            for e in JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.PATCH)]


def subjects() -> list[str]:
    return [payload["subject"] for _, _, payload in probe.calls]


def test_a_run_that_waited_since_before_the_patch_takes_the_old_branch_and_finishes():
    before = waiting_for_the_reply("T-1")
    deploy(patch=PATCH)  # the reworded subject, guarded by the patch
    after = waiting_for_the_reply("T-2")
    assert subjects() == [FIRST_SUBJECT, REWORDED_SUBJECT]
    assert answers(after) == [("ask_customer", 0, PATCH, True)]
    before, after = replied(before), replied(after)
    assert (before.status, after.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED), (before.error, after.error)
    assert answers(before) == [("ask_customer", 0, PATCH, False)]
    assert answers(after) == [("ask_customer", 0, PATCH, True)]  # answered once: the visit run again reads it
    assert len(probe.calls) == 2  # each email once, nothing held, nothing failed


def test_durable_replay_answers_each_run_s_patch_as_it_was_answered():
    before = waiting_for_the_reply("T-1")
    deploy(patch=PATCH)
    after = waiting_for_the_reply("T-2")
    replied(before)
    for run in (before, after):
        (recorded,) = from_database(Run.objects.filter(id=run.id))
        report = replay_run(recorded)
        assert report.ok, report.mismatches
    assert replay_run(next(from_database(Run.objects.filter(id=before.id)))).patches == {PATCH: False}


def test_durable_versions_lists_the_patch_a_waiting_run_still_depends_on():
    waiting_for_the_reply("T-1")
    deploy(patch=PATCH)
    out = StringIO()
    call_command("durable_versions", stdout=out)
    assert (f"test-reply-email v1 patch {PATCH!r}: 1 run(s) on the old branch, 0 on the new; keep its old branch"
            in out.getvalue())
    call_command("durable_versions", "--check", stdout=StringIO())  # guarded: the gate passes
