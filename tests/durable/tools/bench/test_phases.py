"""`durable_bench --in-process`: where a run's time goes, phase by phase, with no broker."""
from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from durable.tools.bench.phases import PHASES, time_phases
from durable.tools.bench.workflows import bench_workflow


@pytest.mark.django_db(transaction=True)
def test_every_store_call_of_every_run_is_timed_in_its_phase():
    workflow = bench_workflow(4)
    run_ids = [services.start_run(workflow=workflow.name, input={}, business_key=f"p-{i}", enqueue=False)[0].id
               for i in range(3)]

    report = time_phases(run_ids, 4)

    assert set(Run.objects.filter(id__in=run_ids).values_list("status", flat=True)) == {RunStatus.SUCCEEDED}
    calls = {phase: len(times) for phase, times in report.by_phase.items()}
    assert calls == {"claim": 3, "resume_point": 3, "recorded_calls": 3, "commit_step": 3 * 3, "finish": 3,
                     "prepare_operation": 0, "move_operation": 0}
    assert report.steps == 12 and report.seconds > 0
    assert report.rest_per_run_ms == pytest.approx(report.run_ms - sum(report.per_run_ms(p) for p in PHASES))


@pytest.mark.django_db(transaction=True)
def test_a_side_effect_step_is_timed_in_the_ledgers_phases():
    workflow = bench_workflow(2, side_effect=True)
    run_ids = [services.start_run(workflow=workflow.name, input={}, business_key=f"p-{i}", enqueue=False)[0].id
               for i in range(3)]

    report = time_phases(run_ids, len(workflow.steps))

    assert set(Run.objects.filter(id__in=run_ids).values_list("status", flat=True)) == {RunStatus.SUCCEEDED}
    assert (len(report.by_phase["prepare_operation"]), len(report.by_phase["move_operation"])) == (3, 3 * 2)


@pytest.mark.django_db(transaction=True)
def test_the_command_prints_each_phase_and_leaves_no_runs_behind(capsys):
    call_command("durable_bench", "--in-process", "--runs", "3", "--steps", "3")

    out = capsys.readouterr().out
    for label in PHASES.values():
        line = next(line for line in out.splitlines() if line.strip().startswith(label))
        assert re.search(r"\d+\s+\d+\.\d{3}\s+\d+\.\d{2}$", line), line
    assert re.search(r"steps/s in this process: \d+\.\d", out)
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_command_can_add_a_side_effect_step(capsys):
    call_command("durable_bench", "--in-process", "--side-effect", "--runs", "2", "--steps", "2")

    out = capsys.readouterr().out
    assert "2 runs x 3 steps (one of them with a side effect)" in out
    line = next(line for line in out.splitlines() if line.strip().startswith(PHASES["move_operation"]))
    assert re.search(r"\s4\s", line), line  # STARTED and SUCCEEDED, for each of the 2 runs
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_in_process_and_compare_do_not_mix():
    with pytest.raises(CommandError, match="without --compare"):
        call_command("durable_bench", "--in-process", "--compare")


@pytest.mark.django_db
def test_a_side_effect_step_needs_in_process():
    with pytest.raises(CommandError, match="goes with --in-process"):
        call_command("durable_bench", "--side-effect")


@pytest.mark.django_db(transaction=True)
def test_the_loop_mode_visits_one_step_as_many_times_as_steps_declared(capsys):
    workflow = bench_workflow(4, loop=True)
    assert [s.name for s in workflow.steps] == ["step"] and workflow.steps[0].routes == ("step",)
    call_command("durable_bench", "--in-process", "--loop", "--runs", "2", "--steps", "4")

    out = capsys.readouterr().out
    assert "2 runs x 4 step visits (4 of one step looping)" in out
    line = next(line for line in out.splitlines() if line.strip().startswith(PHASES["commit_step"]))
    assert re.search(r"\s6\s", line), line  # 3 looping visits' writes per run; the 4th visit finishes it
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_looping_run_ends_in_its_side_effect_step():
    workflow = bench_workflow(3, side_effect=True, loop=True)
    run_id = services.start_run(workflow=workflow.name, input={}, business_key="loop-charge", enqueue=False)[0].id

    report = time_phases([run_id], 4)

    run = Run.objects.get(id=run_id)
    assert (run.status, run.output, run.checkpoint_seq) == (RunStatus.SUCCEEDED, {"n": 4}, 4)
    assert len(report.by_phase["prepare_operation"]) == 1


@pytest.mark.django_db
def test_the_loop_mode_measures_durable_alone():
    with pytest.raises(CommandError, match="--loop measures durable alone"):
        call_command("durable_bench", "--loop", "--compare")
