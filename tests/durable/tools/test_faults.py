"""Random fault points: a stable draw per operation and point, at the rate asked."""
from durable.tools.faults import chosen


def test_rate_one_fires_everywhere_and_rate_zero_nowhere():
    assert all(chosen(f"op{i}", "after_started", rate=1.0, seed="s") for i in range(100))
    assert not any(chosen(f"op{i}", "after_started", rate=0.0, seed="s") for i in range(100))


def test_a_rate_picks_about_that_fraction_of_operations():
    picked = sum(chosen(f"op{i}", "after_commit", rate=0.1, seed="7") for i in range(20_000))
    assert 1_800 < picked < 2_200


def test_the_draw_is_the_same_in_every_process_and_changes_with_the_seed_or_point():
    draws = [chosen(f"op{i}", "after_downstream", rate=0.5, seed="a") for i in range(200)]
    assert draws == [chosen(f"op{i}", "after_downstream", rate=0.5, seed="a") for i in range(200)]
    assert draws != [chosen(f"op{i}", "after_downstream", rate=0.5, seed="b") for i in range(200)]
    assert draws != [chosen(f"op{i}", "after_prepare", rate=0.5, seed="a") for i in range(200)]
