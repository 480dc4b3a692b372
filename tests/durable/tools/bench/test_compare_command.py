"""`durable_bench --compare`: durable, the peers and the floor measured on the same Postgres."""
from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from durable.models import Run
from durable.tools.bench.compare import DBOS, DURABLE_IN_PROCESS, DURABLE_SOLO, FLOOR, LANGGRAPH, NOT_INSTALLED

pytestmark = pytest.mark.worker
NUMBER = r"\d+\.\d+"


def row(table: str, system: str) -> str:
    """The system's line of a table: its name, then the columns (not a goal that names it)."""
    return next(line for line in table.splitlines() if re.match(rf"\s+{re.escape(system)}\s{{2,}}", line))


@pytest.mark.django_db(transaction=True)
def test_compare_measures_durable_the_floor_and_each_peer_or_says_it_is_not_installed(capsys):
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="needs Postgres"):
            call_command("durable_bench", "--compare", "--runs", "3", "--steps", "3", "--workers-list", "1")
        return
    call_command("durable_bench", "--compare", "--runs", "3", "--steps", "3", "--workers-list", "1", "--wakeups", "2")
    report = capsys.readouterr().out
    phases = report.split("\n(b) ")
    assert len(phases) == 2 and "1 side effect" in phases[1]
    for phase in phases:
        table = phase.split("scaling:")[0]
        for system in ("durable", DURABLE_SOLO, DURABLE_IN_PROCESS, FLOOR):
            # steps/s, p50, p99, the ratio, then CPU seconds per 1,000 steps: the process's and its backend's
            steps_per_second, p50, p99, _, cpu, backend_cpu = re.findall(NUMBER, row(table, system).split(system, 1)[1])
            assert min(float(steps_per_second), float(p50), float(p99)) > 0, row(table, system)
            assert float(cpu) >= 0 and float(backend_cpu) >= 0, row(table, system)  # 10 ms ticks: 9 steps may read 0
        for peer in (DBOS, LANGGRAPH):
            line = row(table, peer)
            assert NOT_INSTALLED in line or re.search(rf"{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x\s+-\s+-$", line), line
        assert "goals:" in table
    wakeups = report.split("wake-up latency")[1].splitlines()
    for kind in ("POST /api/runs/", "approval decided", "retry due"):
        probes, p50, p99 = re.search(rf"{re.escape(kind)}.*?(\d+)\s+({NUMBER})\s+({NUMBER})$",
                                     next(line for line in wakeups if kind in line)).groups()
        assert probes == "2" and float(p50) <= float(p99)
    scaling = report.split("scaling:")[1].split("wake-up latency")[0].splitlines()
    assert re.match(rf"\s+1\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+1\.00x", scaling[2])
    assert not Run.objects.filter(workflow_name__startswith="bench-3").exists()  # cleaned up
