"""durable_bench --kill: SIGKILL -> resumed, measured on real workers with the default settings."""
from __future__ import annotations

import pytest
from django.core.management import call_command

from durable.models import Run
from durable.tools.bench.recovery import Recoveries


def test_the_report_gives_p50_and_p99_by_nearest_rank_and_the_settings_it_ran_with():
    lines = Recoveries([9.0, 11.0, 10.0, 14.0]).lines(lease=10.0, sweep=2.0)
    assert "DURABLE_LEASE_SECONDS 10, DURABLE_SWEEP_SECONDS 2" in lines[0] and "4 kills" in lines[0]
    assert "p50 10.5 s, p99 14.0 s, min 9.0 s, max 14.0 s" in lines[1]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_kill_resumes_each_killed_workers_run_on_another_and_leaves_no_run(capsys):
    call_command("durable_bench", "--kill", "1")
    out = capsys.readouterr().out
    assert "1 kill\n" in out and "SIGKILL -> resumed  p50" in out
    assert "each step checkpointed once" in out
    assert not Run.objects.exists()
