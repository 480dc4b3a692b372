"""Retention prunes the history of finished runs and keeps the ledger, the audit trail and where each run ended."""
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from durable.audit import audit
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.retention import prune
from tests.audit import operator_actions
from tests.durable.claims import advance, start_claim

pytestmark = pytest.mark.django_db


def finished_days_ago(run: Run, days: float) -> Run:
    Run.objects.filter(id=run.id).update(finished_at=timezone.now() - timedelta(days=days))
    return Run.objects.get(id=run.id)


@pytest.fixture
def old_claim(demo):
    run = advance(start_claim())
    assert run.status == "SUCCEEDED" and run.checkpoints.count() == 7 and run.journal.exists()
    audit(user=None, action="note", run=run, source="test", status_before="", status_after="")
    return finished_days_ago(run, 40)


def test_an_old_finished_run_keeps_its_last_checkpoint_ledger_and_audit_rows(old_claim):
    ledger = set(SideEffect.objects.filter(run=old_claim).values_list("operation_id", "status"))
    report = prune(timedelta(days=30))
    assert (report.runs, report.checkpoints) == (1, 6)
    assert report.journal_entries > 0 and not JournalEntry.objects.filter(run=old_claim).exists()
    last = Checkpoint.objects.get(run=old_claim)
    assert last.seq == old_claim.checkpoint_seq and last.next_step == ""  # where it ended
    assert set(SideEffect.objects.filter(run=old_claim).values_list("operation_id", "status")) == ledger
    assert operator_actions().filter(run=old_claim).count() == 1
    run = Run.objects.get(id=old_claim.id)
    assert run.pruned_at is not None and run.output == old_claim.output


def test_a_second_pass_finds_nothing_left_to_prune(old_claim):
    prune(timedelta(days=30))
    assert prune(timedelta(days=30)).runs == 0


def test_recent_runs_failed_runs_and_runs_in_flight_are_not_pruned(demo):
    recent = finished_days_ago(advance(start_claim("ORD-1001")), 5)
    failed = advance(start_claim("ORD-1002"))
    Run.objects.filter(id=failed.id).update(status="FAILED", finished_at=timezone.now() - timedelta(days=90))
    pending = start_claim("ORD-1003")
    assert prune(timedelta(days=30)).runs == 0
    for run in (recent, failed):  # a failed run can be retried, and a retry replays its journal
        assert JournalEntry.objects.filter(run=run).exists() and Checkpoint.objects.filter(run=run).count() > 1
    assert Checkpoint.objects.filter(run=pending).exists()


def test_the_command_prunes_in_batches_and_says_what_it_kept(demo):
    for order_id in ("ORD-1001", "ORD-1002", "ORD-1003"):
        finished_days_ago(advance(start_claim(order_id)), 60)
    out = StringIO()
    call_command("durable_prune", older_than_days=30, batch=2, stdout=out)
    assert out.getvalue().startswith("pruned 3 finished run(s): 18 checkpoint(s)")
    assert "ledger and audit trail kept" in out.getvalue()


def test_the_command_needs_an_age(settings):
    settings.DURABLE_RETENTION_DAYS = 0
    with pytest.raises(CommandError, match="older-than-days"):
        call_command("durable_prune")
