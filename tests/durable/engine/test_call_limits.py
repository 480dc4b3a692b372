"""Named limits' pure rules (durable/engine/call_limits.py): how a limit is declared and read, how many calls it
admits now, when a full one frees room by the clock, and the order waiters are served in."""
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import durable
from durable.engine.call_limits import (
    RATE_MARGIN_SECONDS,
    LimitError,
    LimitNow,
    LimitSpec,
    Rate,
    admits,
    check_priority,
    declared_in_code,
    frees_at,
    in_order,
    parse_limits,
)

T0 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- Declaring -----------------------------------------------------------------------------------------------------

def test_a_limit_reads_every_field_of_the_settings_contract():
    limits = parse_limits({"openai": {"concurrency": 50, "rate": "500/m", "tokens": "200000/m", "per": None},
                           "per-customer": {"concurrency": 3, "per": "business_key"}})
    assert limits["openai"] == LimitSpec("openai", 50, Rate(500, 60.0), Rate(200000, 60.0), None)
    assert limits["per-customer"] == LimitSpec("per-customer", 3, per="business_key")
    assert Rate.parse("7/h", limit="x", field_name="rate") == Rate(7, 3600.0)
    assert str(Rate(20, 1.0)) == "20/s"


@pytest.mark.parametrize(("fields", "field", "says"), [
    ({}, "concurrency", "at least one of concurrency, rate or tokens"),
    ({"concurrency": 0}, "concurrency", "at least 1"),
    ({"concurrency": True}, "concurrency", "whole number"),
    ({"rate": "500/min"}, "rate", '"N/s", "N/m" or "N/h"'),
    ({"rate": "0/s"}, "rate", "at least 1"),
    ({"tokens": 1000}, "tokens", '"N/s", "N/m" or "N/h"'),
    ({"concurrency": 1, "per": "tenant"}, "per", "business_key"),
    ({"concurrency": 1, "burst": 3}, "burst", "is not a field of a limit"),
])
def test_a_limit_declared_wrongly_is_refused_naming_the_limit_and_the_field(fields, field, says):
    with pytest.raises(LimitError) as refused:
        parse_limits({"openai": fields})
    assert (refused.value.limit, refused.value.field) == ("openai", field)
    assert "'openai'" in str(refused.value) and f"'{field}'" in str(refused.value) and says in str(refused.value)


def test_a_limit_is_declared_in_code_with_durable_limit():
    try:
        spec = durable.limit("test-code-limit", concurrency=2, rate="10/s")
        assert declared_in_code["test-code-limit"] == spec == LimitSpec("test-code-limit", 2, Rate(10, 1.0))
        with pytest.raises(ValueError, match="'test-code-limit', field 'rate'"):
            durable.limit("test-code-limit", rate="fast")
    finally:
        declared_in_code.pop("test-code-limit", None)


def test_a_limit_per_key_takes_its_key_from_the_run():
    assert LimitSpec("a", 1).key_of("ORD-1", {"tenant": "acme"}) == ""
    assert LimitSpec("a", 1, per="business_key").key_of("ORD-1", {}) == "ORD-1"
    assert LimitSpec("a", 1, per="label:tenant").key_of("ORD-1", {"tenant": "acme"}) == "acme"
    assert LimitSpec("a", 1, per="input:tenant").key_of("ORD-1", {"tenant": 7}) == "7"
    assert LimitSpec("a", 1, per="label:tenant").key_of("ORD-1", {}) == ""  # a run without it counts under ""


def test_a_priority_is_a_whole_number_from_minus_100_to_100():
    assert check_priority(-100) == -100 and check_priority(100) == 100
    for wrong in (101, -101, 1.5, "1", True, None):
        with pytest.raises(ValueError, match="from -100 to 100"):
            check_priority(wrong)


# -- Admitting -----------------------------------------------------------------------------------------------------

def test_concurrency_admits_what_is_not_in_use():
    spec = LimitSpec("c", concurrency=2)
    assert admits(spec, LimitNow(T0, in_use=0)) == 2
    assert admits(spec, LimitNow(T0, in_use=2)) == 0
    assert frees_at(spec, LimitNow(T0, in_use=2)) is None  # only a call giving its slot back frees one


def test_a_rate_counts_starts_in_the_window_with_its_margin_and_room_granted_to_woken_runs():
    spec = LimitSpec("r", rate=Rate(2, 1.0))
    starts = (at(0.0), at(0.5))
    assert admits(spec, LimitNow(at(0.9), starts=starts)) == 0
    assert admits(spec, LimitNow(at(0.9), starts=(at(0.5),), granted=1)) == 0  # the woken run's start is to come
    assert admits(spec, LimitNow(at(1.0 + RATE_MARGIN_SECONDS + 0.001), starts=starts)) == 1
    assert frees_at(spec, LimitNow(at(0.9), starts=starts)) == at(1.0 + RATE_MARGIN_SECONDS)


def test_a_rate_whose_room_is_all_granted_to_woken_runs_frees_one_window_after_now_not_never():
    """Runs woken with room have not started yet: a newcomer waits a window from now at the latest, not for the
    backstop recheck (it once parked for the lease's 10 s while the window slid every second)."""
    spec = LimitSpec("r", rate=Rate(2, 1.0))
    window = timedelta(seconds=1.0 + RATE_MARGIN_SECONDS)
    assert frees_at(spec, LimitNow(at(5), granted=2)) == at(5) + window
    assert frees_at(spec, LimitNow(at(5), starts=(at(4.5),), granted=1)) == at(4.5) + window
    assert frees_at(spec, LimitNow(at(5), starts=(at(4.5),), granted=3)) == at(5) + window


def test_tokens_over_the_period_stop_new_calls_until_enough_leave_the_window():
    spec = LimitSpec("t", tokens=Rate(1000, 60.0))
    used = ((at(0), 600), (at(10), 500))
    assert admits(spec, LimitNow(at(20), tokens=used)) == 0
    assert frees_at(spec, LimitNow(at(20), tokens=used)) == at(60)  # the first 600 leave: 500 < 1000
    assert admits(spec, LimitNow(at(60.5), tokens=used)) > 0


def test_a_paused_limit_admits_nothing_until_the_pause_ends():
    spec = LimitSpec("p", concurrency=5)
    held = LimitNow(T0, paused_until=at(3))
    assert admits(spec, held) == 0 and frees_at(spec, held) == at(3)
    assert admits(spec, LimitNow(at(3), paused_until=at(3))) == 5


def test_waiters_are_served_by_priority_then_arrival():
    waiters = [(0, at(1), 1), (5, at(3), 2), (0, at(0), 3), (5, at(2), 4), (-1, at(-9), 5)]
    assert [ticket for *_, ticket in in_order(waiters)] == [4, 2, 3, 1, 5]


@settings(max_examples=200, deadline=None)
@given(count=st.integers(1, 20), arrivals=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=120))
def test_admitting_by_the_rule_never_starts_more_than_n_in_any_window_of_the_period_plus_margin(count, arrivals):
    """Calls asking at the given times, each started when `admits` says so (else when `frees_at` says): no window
    of the period and its margin ever holds more than N starts."""
    spec = LimitSpec("r", rate=Rate(count, 1.0))
    window = 1.0 + RATE_MARGIN_SECONDS
    starts: list[datetime] = []
    for asked in sorted(arrivals):
        moment = max(at(asked), starts[-1] if starts else T0)
        while admits(spec, LimitNow(moment, starts=tuple(starts))) < 1:
            moment = frees_at(spec, LimitNow(moment, starts=tuple(starts))) + timedelta(microseconds=1)
        starts.append(moment)
    for index, first in enumerate(starts):
        within = [s for s in starts[index:] if s - first < timedelta(seconds=window)]
        assert len(within) <= count
