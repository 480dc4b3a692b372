"""`durable_bench --parallel N`: runs of one step making N activities at once, timed in-process."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from durable.models import JournalEntry, Run


@pytest.mark.django_db(transaction=True)
def test_the_parallel_mode_runs_its_groups_reports_them_and_leaves_nothing_behind(capsys):
    call_command("durable_bench", "--parallel", "3", "--call-ms", "1", "--runs", "2")
    out = capsys.readouterr().out
    assert "durable_bench --parallel 3: 2 runs of one step making 3 activities of 1 ms at once" in out
    assert "ctx.parallel (every call made and recorded): median " in out
    assert "one after another they would take 3 ms" in out
    assert not Run.objects.filter(workflow_name="bench-parallel-3").exists()
    assert not JournalEntry.objects.exists()
