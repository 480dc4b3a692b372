"""The comparison's arithmetic and tables: ratios, percentiles, medians, goals, worker lists."""
from __future__ import annotations

import pytest

from durable.tools.bench.compare import (
    DBOS,
    DURABLE,
    FLOOR,
    LANGGRAPH,
    NOT_INSTALLED,
    SystemResult,
    comparison_table,
    from_intervals,
    goal_lines,
    median_result,
    parse_workers_list,
    percentile,
    ratio,
    scaling_table,
)
from durable.tools.bench.peers import StepClock, Workload


def result(system: str, steps_per_second: float) -> SystemResult:
    return SystemResult(system, steps=int(steps_per_second * 2), seconds=2.0, step_p50_ms=1.0, step_p99_ms=3.0)


def test_ratio_is_none_when_either_side_was_not_measured():
    assert ratio(300, 150) == 2.0
    assert ratio(0, 150) is None and ratio(300, 0) is None


def test_percentile_of_none_one_and_many_values():
    assert percentile([], 50) == 0.0
    assert percentile([4.0], 99) == 4.0
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)


def test_a_result_reports_steps_per_second_and_survives_its_json_round_trip():
    r = from_intervals(DBOS, steps=1000, seconds=4.0, intervals_ms=[1.0, 2.0, 3.0])
    assert r.steps_per_second == 250.0 and r.step_p50_ms == 2.0
    assert SystemResult.from_json(r.to_json()) == r


def test_an_unmeasured_peer_shows_why_instead_of_numbers():
    missing = SystemResult(LANGGRAPH, note=NOT_INSTALLED)
    assert not missing.measured and missing.steps_per_second == 0.0
    lines = comparison_table([result(DURABLE, 500), missing])
    assert lines[2].split(NOT_INSTALLED)[0].strip() == LANGGRAPH
    assert "pip install -e '.[bench]'" in lines[2]


def test_the_table_gives_each_system_its_ratio_to_durable():
    lines = comparison_table([result(DURABLE, 500), result(DBOS, 250), result(FLOOR, 2000)])
    assert lines[0].split() == ["system", "steps/s", "p50", "ms", "p99", "ms", "vs", "durable", "CPU", "s/1k",
                                "steps:", "process", "backend"]
    assert lines[1].split()[-6:] == ["500.0", "1.00", "3.00", "1.00x", "-", "-"]  # CPU not measured
    assert lines[2].split()[-3] == "0.50x" and lines[3].split()[-3] == "4.00x"


def test_cpu_per_1000_steps_comes_from_the_seconds_a_runner_measured():
    measured = from_intervals(FLOOR, steps=2000, seconds=1.0, intervals_ms=[0.3], cpu=(0.5, 0.25))
    assert (measured.worker_cpu_per_1000, measured.backend_cpu_per_1000) == (0.25, 0.125)
    assert comparison_table([measured])[1].split()[-2:] == ["0.25", "0.12"]


def test_goals_say_met_missed_or_not_measured():
    rows = [result(DURABLE, 600), result(DBOS, 300), result(LANGGRAPH, 400), SystemResult(FLOOR, note=NOT_INSTALLED)]
    dbos, langgraph, floor = goal_lines(rows)
    assert "MISSED (600 vs 1500 steps/s)" in dbos
    assert goal_lines(rows, side_effect=True) == ["  durable >= 2.5 x LangGraph + PostgresSaver: MISSED (600 vs 1000 steps/s)"]
    assert "MISSED (600 vs 1600 steps/s)" in langgraph
    assert floor.endswith("not measured")


def test_scaling_is_relative_to_the_fewest_workers():
    lines = scaling_table({2: result(DURABLE, 800), 1: result(DURABLE, 500), 4: result(DURABLE, 900)})
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "4"]
    assert [line.split()[-1] for line in lines[1:]] == ["1.00x", "1.60x", "1.80x"]


def test_the_median_repeat_is_a_whole_run_and_ignores_failed_ones():
    runs = [result(DURABLE, 300), result(DURABLE, 500), SystemResult(DURABLE, note="failed"), result(DURABLE, 400)]
    assert median_result(runs).steps_per_second == 400
    assert median_result([SystemResult(DBOS, note=NOT_INSTALLED)]).note == NOT_INSTALLED


def test_workers_list_is_sorted_unique_and_positive():
    assert parse_workers_list("4,1,2,2") == [1, 2, 4]
    for bad in ("", "0,1", "one"):
        with pytest.raises(ValueError, match="--workers-list"):
            parse_workers_list(bad)


def test_the_side_effect_adds_one_step_per_workflow():
    assert Workload(200, 10, False, "").total_steps == 2000
    assert Workload(200, 10, True, "").total_steps == 2200


def test_the_step_clock_measures_between_steps_of_one_workflow_only(monkeypatch):
    ticks = iter([1.0, 1.002, 1.005, 9.0, 9.001])
    monkeypatch.setattr("durable.tools.bench.peers.time.perf_counter", lambda: next(ticks))
    clock = StepClock()
    for workflow in ([1, 2, 3], [1, 2]):
        clock.start_workflow()
        for _ in workflow:
            clock.tick()
    assert clock.intervals_ms == pytest.approx([2.0, 3.0, 1.0])
