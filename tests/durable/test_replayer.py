"""Replay before a deploy (issue 40, part 2): `durable_replay` re-executes recorded runs on the code installed now,
every call answered from the record and nothing called or written, and names each run whose code would now ask for
something else; `durable_export` writes the records it replays in CI; `durable_versions --check` replays every
unfinished run's current visit, so the deploy gate catches a reworded email the run already sent."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable import send_event, services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.replay_records import from_database
from durable.replayer import replay_run
from tests.durable.claims import advance
from tests.durable.ledger_workflows import probe
from tests.durable.replay_workflows import FIRST_SUBJECT, REWORDED_SUBJECT, deploy, first_deploy  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("first_deploy")]


def waiting_for_the_reply() -> Run:
    run, _ = services.start_run(workflow="test-reply-email", input={}, business_key="T-1")
    run = advance(run)
    assert run.status == RunStatus.WAITING, run.error
    return run


def replay(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("durable_replay", *args, stdout=out)
    except CommandError as refused:
        return refused.returncode, out.getvalue() + str(refused)
    return 0, out.getvalue()


def test_durable_replay_catches_the_reworded_subject_of_an_email_a_waiting_run_already_sent():
    run = waiting_for_the_reply()
    written = JournalEntry.objects.filter(run=run).count()
    assert replay() == (0, "replayed 1 run(s), 1 visit(s): 0 would now ask for something else, 0 not replayed\n")
    deploy(subject=REWORDED_SUBJECT)
    code, said = replay()
    assert code == 1
    assert (f"run {run.id} (test-reply-email v1) visit 0 step 'ask_customer' side effect 'send_email' for T-1:ask: "
            f"recorded {{'subject': {FIRST_SUBJECT!r}}}, new {{'subject': {REWORDED_SUBJECT!r}}}") in said
    assert "1 would now ask for something else" in said
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and len(probe.calls) == 1  # nothing called, nothing written
    assert JournalEntry.objects.filter(run=run).count() == written


def test_an_export_replays_in_ci_as_the_database_does(tmp_path):
    run = waiting_for_the_reply()
    export = tmp_path / "runs.jsonl"
    call_command("durable_export", "--output", str(export), stderr=StringIO())
    SideEffect.objects.all().delete()  # CI has no production database: only the export
    Run.objects.all().delete()
    deploy(subject=REWORDED_SUBJECT)
    code, said = replay("--from", str(export))
    assert code == 1 and f"run {run.id} (test-reply-email v1) visit 0" in said and REWORDED_SUBJECT in said
    deploy()
    assert replay("--from", str(export))[0] == 0


def test_the_deploy_gate_refuses_the_text_change_and_passes_once_it_is_guarded():
    waiting_for_the_reply()
    deploy(subject=REWORDED_SUBJECT)
    out = StringIO()
    with pytest.raises(CommandError, match="1 unfinished run\\(s\\) would be held on a replay mismatch"):
        call_command("durable_versions", "--check", stdout=out)
    assert "would be held: step 'ask_customer' (visit 0) side effect 'send_email'" in out.getvalue()
    deploy()
    out = StringIO()
    call_command("durable_versions", "--check", stdout=out)
    assert "every unfinished run can resume" in out.getvalue()


def test_a_finished_run_whose_step_would_now_take_another_route_is_named_with_both_routes():
    run, _ = services.start_run(workflow="test-replay-route", input={}, business_key="T-2")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    deploy(route="refund")
    (recorded,) = from_database(Run.objects.filter(id=run.id))
    report = replay_run(recorded)
    assert report.visits == 2 and len(report.mismatches) == 1
    mismatch = report.mismatches[0]
    assert (mismatch.step, mismatch.visit, mismatch.what) == ("triage", 0, "route")
    assert (mismatch.recorded, mismatch.new) == ("to 'reply'", "to 'refund'")
    assert replay("--unfinished")[0] == 0  # a finished run is not what a deploy would hold


def test_a_run_replays_up_to_where_its_record_ends_and_a_reply_s_event_is_answered_from_it():
    run = waiting_for_the_reply()
    assert send_event(run_id=run.id, name="reply", payload={"text": "thanks"}).woke
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    (recorded,) = from_database(Run.objects.filter(id=run.id))
    report = replay_run(recorded)
    assert report.ok and report.visits == 2


def test_an_export_that_is_not_one_is_refused_naming_the_line(tmp_path):
    export = tmp_path / "runs.jsonl"
    export.write_text('{"format": "durable-replay/1", "run_id": "x"}\n')
    code, said = replay("--from", str(export))
    assert code == 1 and "line 1:" in said
