"""Which fire times a due schedule starts runs for: on time always, missed ones as its catch-up policy says."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.schedules import CatchUp, business_key_for, fire_times_due

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def next_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0) + MINUTE


def last_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def due(catch_up: CatchUp, *, due_at: datetime, now: datetime, window: timedelta = timedelta(hours=1), limit: int = 100):
    return fire_times_due(due_at=due_at, now=now, next_after=next_minute, last_at_or_before=last_minute,
                          catch_up=catch_up, window=window, on_time=timedelta(seconds=60), limit=limit)


@pytest.mark.parametrize("catch_up", list(CatchUp))
def test_a_fire_time_found_on_time_starts_its_run_whatever_the_policy(catch_up):
    firing = due(catch_up, due_at=T0, now=T0 + timedelta(seconds=0.4))
    assert firing.fire_times == (T0,) and not firing.passed_over and firing.next_fire_at == T0 + MINUTE


def test_a_schedule_not_yet_due_starts_nothing():
    firing = due(CatchUp.ALL, due_at=T0, now=T0 - timedelta(seconds=1))
    assert firing.fire_times == () and firing.next_fire_at == T0


def test_after_a_ten_minute_outage_none_starts_only_the_fire_time_that_is_on_time():
    firing = due(CatchUp.NONE, due_at=T0, now=T0 + 10 * MINUTE + timedelta(seconds=30))
    assert firing.fire_times == (T0 + 10 * MINUTE,) and firing.passed_over
    assert firing.next_fire_at == T0 + 11 * MINUTE


def test_after_an_outage_between_fire_times_none_starts_nothing():
    hourly = fire_times_due(due_at=T0, now=T0 + 10 * MINUTE, next_after=lambda at: last_minute(at).replace(
        minute=0) + timedelta(hours=1), last_at_or_before=lambda at: at.replace(minute=0, second=0, microsecond=0),
        catch_up=CatchUp.NONE, window=timedelta(hours=1), on_time=timedelta(seconds=60))
    assert hourly.fire_times == () and hourly.passed_over and hourly.next_fire_at == T0 + timedelta(hours=1)


def test_after_an_outage_latest_starts_the_latest_missed_fire_time_alone():
    hourly = fire_times_due(due_at=T0, now=T0 + 10 * MINUTE, next_after=lambda at: last_minute(at).replace(
        minute=0) + timedelta(hours=1), last_at_or_before=lambda at: at.replace(minute=0, second=0, microsecond=0),
        catch_up=CatchUp.LATEST, window=timedelta(hours=1), on_time=timedelta(seconds=60))
    assert hourly.fire_times == (T0,) and not hourly.passed_over


def test_after_an_outage_all_starts_every_fire_time_within_its_window_oldest_first():
    firing = due(CatchUp.ALL, due_at=T0, now=T0 + 10 * MINUTE + timedelta(seconds=1), window=timedelta(minutes=5))
    assert firing.fire_times == tuple(T0 + n * MINUTE for n in range(6, 11)) and firing.passed_over
    everything = due(CatchUp.ALL, due_at=T0, now=T0 + 10 * MINUTE + timedelta(seconds=1))
    assert everything.fire_times == tuple(T0 + n * MINUTE for n in range(11)) and not everything.passed_over


def test_all_far_behind_catches_up_in_bounded_steps_leaving_the_rest_due():
    firing = due(CatchUp.ALL, due_at=T0, now=T0 + 10 * MINUTE, limit=4)
    assert firing.fire_times == tuple(T0 + n * MINUTE for n in range(4)) and firing.next_fire_at == T0 + 4 * MINUTE


@given(st.sampled_from(list(CatchUp)), st.integers(0, 600), st.integers(0, 100_000))
def test_every_fire_time_is_due_in_order_and_the_next_one_is_after_now_or_left_due(catch_up, late_s, due_offset_s):
    due_at = next_minute(T0 + timedelta(seconds=due_offset_s)) - MINUTE
    now = due_at + timedelta(seconds=late_s)
    firing = due(catch_up, due_at=due_at, now=now, limit=5)
    times = list(firing.fire_times)
    assert times == sorted(set(times)) and all(due_at <= t <= now for t in times)
    assert firing.next_fire_at > now or (catch_up is CatchUp.ALL and len(times) == 5 and firing.next_fire_at > times[-1])


def test_a_fire_time_moved_off_the_expression_still_fires_once():
    moved = T0 + timedelta(seconds=17)  # as a tool or a test moves it: the time written is the fire time
    firing = due(CatchUp.NONE, due_at=moved, now=moved + timedelta(seconds=0.2))
    assert firing.fire_times == (moved,) and firing.next_fire_at == T0 + MINUTE


def test_a_business_key_names_the_schedule_and_the_local_fire_time():
    assert business_key_for("{schedule}:{fire_time:%Y-%m-%d}", schedule="nightly", fire_time=T0) == "nightly:2026-12-07"


@pytest.mark.parametrize("template", ["{fire_time.tzinfo}", "{run}", "{schedule!r}", "{fire_time:{schedule}}",
                                      "{schedule:%Y}", "{", "{0}", "   "])
def test_a_template_naming_anything_else_or_unfillable_is_refused(template):
    with pytest.raises(ValueError):
        business_key_for(template, schedule="nightly", fire_time=T0)
