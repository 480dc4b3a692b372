"""The fault drill's waits (`durable_drill --waits`): its verdicts on made-up counts, what it counts from the
database, and a small real drill through crashing workers."""
from __future__ import annotations

from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, RunEvent
from durable.runtime.fault_points import AFTER_CHILDREN_ENDED, AFTER_EVENT_CONSUMED, WAIT_FAULT_POINTS
from durable.tools.drill_waits import SCENARIOS, WaitsConfig, WaitsCounts, judge, measure, validate
from durable.tools.drill_waits_workload import CHILD, EVENT, LISTENER, PARENT

CLEAN = WaitsCounts(runs=4, crashes=8, completed=4, lost_runs=0, events_sent=8, consumed=8, duplicates=0,
                    lost_events=0, out_of_order=0, children=0, extra_children=0, missing_children=0)


def test_a_clean_cell_passes():
    assert judge(CLEAN) == []


@pytest.mark.parametrize("counts, reason", [
    (replace(CLEAN, duplicates=1), "1 event(s) kept or consumed twice"),
    (replace(CLEAN, lost_events=2), "2 event(s) lost"),
    (replace(CLEAN, out_of_order=1), "1 run(s) consumed events out of arrival order"),
    (replace(CLEAN, children=5, extra_children=1), "1 child run(s) started twice"),
    (replace(CLEAN, missing_children=1), "1 parent visit(s) without their child run"),
    (replace(CLEAN, completed=3, lost_runs=1), "1 run(s) lost"),
    (replace(CLEAN, crashes=3), "the fault fired in only 3 of 4 run(s)"),
])
def test_each_violation_is_named(counts, reason):
    assert judge(counts) == [reason]


def test_a_drill_of_no_waits_point_is_refused():
    with pytest.raises(ValueError, match="--points must name the waits' fault points"):
        validate(WaitsConfig(points=("after_commit",)))
    assert {cell.point for cell in WaitsConfig().cells()} == set(WAIT_FAULT_POINTS)


@pytest.mark.django_db
def test_an_event_consumed_twice_or_never_is_counted():
    runs = []
    for key in ("twice", "never"):
        run, _ = services.start_run(workflow=LISTENER, input={"expect": 2}, business_key=key, enqueue=False)
        runs.append(run)
        for seq in (0, 1):
            RunEvent.objects.create(run=run, name=EVENT, payload={"seq": seq}, request_hash="x", sender="test",
                                    received_at=timezone.now())
    twice, never = runs
    first, second = RunEvent.objects.filter(run=twice).order_by("id")
    for event in (first, first):  # the first event consumed by two waits: the second never
        JournalEntry.objects.create(run=twice, kind=JournalEntry.Kind.WAIT_ENDED, step="listen",
                                    detail={"consumed": event.id}, fencing_token=1, created_at=timezone.now())
    Run.objects.filter(id=twice.id).update(status=RunStatus.SUCCEEDED, output={"received": [
        {"id": first.id, "seq": 0}, {"id": first.id, "seq": 0}]})
    Run.objects.filter(id=never.id).update(status=RunStatus.SUCCEEDED, output={"received": []})
    counts = measure(SCENARIOS["early"], [twice.id, never.id], crashes=4)
    assert (counts.consumed, counts.duplicates, counts.lost_events, counts.lost_runs) == (2, 2, 3, 0)
    assert judge(counts) == ["2 event(s) kept or consumed twice", "3 event(s) lost"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_small_drill_of_the_waits_passes_and_cleans_up(tmp_path):
    out = StringIO()
    call_command("durable_drill", "--waits", "--runs-per-cell", "2", "--workers", "1", "--timeout", "120",
                 "--points", f"{AFTER_EVENT_CONSUMED},{AFTER_CHILDREN_ENDED}", stdout=out)
    report = out.getvalue()
    assert "durable_drill --waits: events and child runs, 2 run(s) per cell, 4 cell(s)" in report
    for scenario in ("early", "retried", "burst", "child"):
        assert f"x {scenario}: ok" in report
    totals = next(line for line in report.splitlines() if line.startswith("totals:"))
    assert totals.startswith("totals: 8 runs, ") and "0 duplicate(s), 0 lost event(s)" in totals
    assert "2 child runs (0 extra, 0 missing), 0 lost run(s), 0 cell(s) in violation" in totals
    # A passing drill deletes its parents and children; the runs it sent events to stay (the audit trail names them).
    assert not Run.objects.filter(workflow_name__in=[PARENT, CHILD]).exists()
    assert set(Run.objects.values_list("workflow_name", "status")) == {(LISTENER, RunStatus.SUCCEEDED)}
    assert Run.objects.count() == 6 and "6 run(s) kept: the audit trail" in report


@pytest.mark.django_db
def test_the_drill_refuses_side_effect_points_for_the_waits():
    with pytest.raises(CommandError, match="waits' fault points"):
        call_command("durable_drill", "--waits", "--points", "after_commit", stdout=StringIO())
    assert not Run.objects.exists()
