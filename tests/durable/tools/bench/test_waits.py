"""`durable_bench --events N` / `--timers N` (a real worker and broker) and `--parked N` (Postgres): what they
report and what they leave. Never a timing: the figures are the machine's, docs/benchmarks.md quotes them."""
from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import override_settings

from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, RunEvent
from durable.tools.bench import parked, waits
from durable.tools.bench.waits import WaitsReport

NUMBER = r"\d+\.\d"


def row(report: str, label: str) -> tuple[int, float, float, float]:
    """A latency row: its count, p50, p99 and max."""
    found = re.search(rf"{re.escape(label)}\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})$", report, re.MULTILINE)
    assert found, f"no row {label!r} in:\n{report}"
    count, p50, p99, worst = found.groups()
    return int(count), float(p50), float(p99), float(worst)


def test_a_report_gives_each_rows_count_p50_p99_and_max_and_how_many_runs_ended():
    report = "\n".join(WaitsReport(["the title"], [("event sent -> step running on", [10.0, 20.0, 30.0])],
                                   runs=3, succeeded=2).lines())
    assert report.startswith("the title\n") and re.search(r"wake-up\s+runs\s+p50 ms\s+p99 ms\s+max ms", report)
    assert row(report, "event sent -> step running on") == (3, 20.0, 29.8, 30.0)
    assert report.endswith("every run ended: 2 of 3 SUCCEEDED")


@pytest.mark.parametrize("given", ["6", "a,b", "5,1", "-1,2"])
def test_a_timer_range_that_is_not_shortest_longest_is_refused(given):
    with pytest.raises(CommandError, match="--timer-seconds"):
        call_command("durable_bench", "--timers", "1", "--timer-seconds", given)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_events_and_timers_wake_every_parked_run_and_report_each_latency(capsys):
    call_command("durable_bench", "--events", "3", "--timers", "4", "--timer-seconds", "0.1,3",
                 "--timers-per-second", "10")
    report = capsys.readouterr().out
    assert "event sent -> the waiting step running again: 3 runs parked on ctx.wait_for_event" in report
    for label in ("durable.send_event() returned (committed, message sent)",
                  "event sent -> the worker's wait takes it from the mailbox", "event sent -> step running on"):
        count, p50, p99, worst = row(report, label)
        assert count == 3 and 0 < p50 <= p99 <= worst
    assert "timer due -> the sleeping step running again: 4 runs started 10 a second, each sleeping 0.1 to 3 s" in report
    for label in ("timer due -> woken (PENDING, message sent)", "timer due -> step running on"):
        assert row(report, label)[0] == 4
    assert row(report, "sleeping less than a sweep interval (2 s)")[0] + row(report, "sleeping a sweep interval or more")[0] == 4
    assert report.count("every run ended: 3 of 3 SUCCEEDED") == 1 and report.count("every run ended: 4 of 4 SUCCEEDED") == 1
    # The event runs stay (each event sent is audited), each ended having consumed its one event; the timer runs go.
    event_runs = Run.objects.filter(workflow_name=waits.EVENT_WORKFLOW)
    assert sorted(event_runs.values_list("status", flat=True)) == [RunStatus.SUCCEEDED] * 3
    assert RunEvent.objects.filter(run__in=event_runs, consumed_at__isnull=False).count() == 3
    assert not Run.objects.filter(workflow_name=waits.TIMER_WORKFLOW).exists()


@pytest.mark.django_db(transaction=True)
def test_parked_needs_postgres_then_explains_the_sweepers_queries_and_removes_its_runs(capsys):
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="needs Postgres|generate_series"):
            call_command("durable_bench", "--parked", "1000")
        return
    call_command("durable_bench", "--parked", "3000")
    report = capsys.readouterr().out
    assert "seeded 3,000 parked runs" in report and "parked runs: 3,000 of 3,000 runs, 3 of them due now" in report
    assert "a beat waking 3 runs (SELECT, UPDATE, a message each, rolled back)" in report
    wake_plan = report.split("of wake_due()'s SELECT:")[1].split("EXPLAIN")[0]
    assert "run_wake_due" in wake_plan and "Seq Scan on durable_run" not in wake_plan
    assert "Execution Time" in report.split("of due_runs()' SELECT:")[1]
    assert not Run.objects.exists() and not JournalEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_parked_runs_kept_stay_parked_and_the_console_benchmark_times_their_pages(capsys):
    if connection.vendor != "postgresql":
        pytest.skip("the seeding uses Postgres' generate_series")
    call_command("durable_bench", "--parked", "2000", "--keep")
    # The beats were undone: what was due is still parked, and due.
    assert Run.objects.filter(workflow_name__startswith=parked.PREFIX, status=RunStatus.WAITING).count() == 2000
    try:
        with override_settings(ALLOWED_HOSTS=["console.example.com"], SECURE_SSL_REDIRECT=True):
            call_command("durable_console_bench", runs=1000, approvals=5, repeat=1)
        report = capsys.readouterr().out
        assert re.search(r"runs, status=WAITING \(parked\)\s+50\s+200\s", report)
        assert re.search(r"run page, a parked run\s+0\s+200\s", report)
    finally:
        parked.clear()
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_beside_parked_runs_the_planner_counts_a_workflows_version_as_it_is(capsys):
    """Parked runs of other workflows, all at version 1, made the planner multiply the share of a name by the share
    of a version and misjudge the runs list's workflow+version filter (migration 0022_planner_statistics)."""
    if connection.vendor != "postgresql":
        pytest.skip("extended statistics are Postgres'")
    from durable.tools.bench import console

    parked.seed(6000)
    console.seed(6000, approvals=0)
    try:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE durable_run")
            cursor.execute("EXPLAIN (FORMAT JSON) SELECT id FROM durable_run WHERE workflow_name = 'bench-console-2' "
                           "AND workflow_version = 3")
            plan = cursor.fetchone()[0]  # psycopg reads the json column as a list already
            estimated = plan[0]["Plan"]["Plan Rows"]
        actual = Run.objects.filter(workflow_name="bench-console-2", workflow_version=3).count()
        assert actual == 400 and abs(estimated - actual) <= actual * 0.1, estimated  # without: 200, half of it
    finally:
        console.clear()
        parked.clear()


@pytest.mark.django_db
def test_the_search_keeps_a_histogram_of_a_thousand_keys_and_fields_on_postgres():
    """With a 100-value histogram, a million parked runs' keys beside the others left no `ord-99...` key in it, and
    the search for a part thousands of runs share was judged rare (migration 0022_planner_statistics)."""
    if connection.vendor != "postgresql":
        pytest.skip("per-column statistics targets are Postgres'")
    with connection.cursor() as cursor:
        cursor.execute("""SELECT attname, attstattarget FROM pg_attribute
                          WHERE attrelid = 'durable_runsearch'::regclass AND attname IN ('business_key', 'field_text')""")
        assert dict(cursor.fetchall()) == {"business_key": 1000, "field_text": 1000}
