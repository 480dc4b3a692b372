"""durable_bench's cost and long-history options: CPU from /proc, resuming past many recorded
results, and the sweeper's query on a seeded table."""
from __future__ import annotations

import os

import pytest
from django.core.management import call_command
from django.db import connection

from durable.models import JournalEntry, Run
from durable.tools.bench.cpu import CpuMeter, process_cpu_seconds


def test_cpu_seconds_are_read_for_this_process_and_none_for_a_process_that_is_not_there():
    assert process_cpu_seconds() > 0 and process_cpu_seconds(os.getpid()) > 0
    assert process_cpu_seconds(2 ** 22 + 1) is None  # above pid_max's default: no such process


@pytest.mark.django_db
def test_the_meter_counts_this_process_and_the_backend_it_talked_to_from_its_start():
    meter = CpuMeter()
    connection.ensure_connection()
    meter.start()
    sum(i * i for i in range(200_000))  # some CPU in this process
    meter.sample()
    spent = meter.as_json()
    assert spent["worker_cpu"] >= 0 and spent["backend_cpu"] >= 0
    assert bool(meter.backends) == (connection.vendor == "postgresql")  # SQLite has no backend process


@pytest.mark.django_db(transaction=True)
def test_resume_with_reads_back_every_recorded_result_and_leaves_nothing(capsys):
    call_command("durable_bench", "--resume-with", "25")
    assert "resume with 25 recorded activity results" in capsys.readouterr().out
    assert not Run.objects.exists() and not JournalEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_sweeper_at_times_the_sweepers_query_on_seeded_runs_and_removes_them(capsys):
    if connection.vendor != "postgresql":
        pytest.skip("the seeding uses Postgres' generate_series")
    call_command("durable_bench", "--sweeper-at", "2000")
    out = capsys.readouterr().out
    assert "seeded 2,000 runs" in out and "table now 2,000 runs" in out and "due_runs(): p50" in out
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_sweeper_at_with_keep_leaves_the_seeded_runs_for_the_console_benchmark(capsys):
    if connection.vendor != "postgresql":
        pytest.skip("the seeding uses Postgres' generate_series")
    from durable.tools.bench import console

    call_command("durable_bench", "--sweeper-at", "1000", "--keep")
    assert "due_runs(): p50" in capsys.readouterr().out
    assert Run.objects.filter(workflow_name__startswith=console.PREFIX).count() == 1000
    console.clear()
