"""What a parked run waits for, as the run records it; event names; the key a child run starts once by."""
from datetime import UTC, datetime

import pytest

from durable.engine.waits import Event, WaitingFor, WaitKind, check_event_name, child_start_key

UNTIL = datetime(2026, 12, 8, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize("name", ["reply", "customer_reply", "order.shipped", "stripe:charge.refunded", "a-1"])
def test_an_event_name_is_letters_digits_and_a_few_separators(name):
    assert check_event_name(name) == name


@pytest.mark.parametrize("name", ["", " reply", "no spaces", "_leading", "x" * 101, None, 7, "é"])
def test_any_other_name_is_refused_saying_what_a_name_may_be(name):
    with pytest.raises(ValueError, match="1-100 letters"):
        check_event_name(name)


def test_what_a_run_waits_for_survives_its_round_trip_through_json():
    waiting = WaitingFor(WaitKind.EVENT, "act", 4, UNTIL, events=("approved", "declined"), call_index=2)
    assert WaitingFor.from_json(waiting.as_json()) == waiting
    assert waiting.as_json()["until"] == "2026-12-08T09:30:00+00:00"


def test_only_an_event_of_a_name_it_waits_for_wakes_a_run():
    waiting = WaitingFor(WaitKind.EVENT, "act", 4, None, events=("reply",))
    assert waiting.woken_by_event("reply") and not waiting.woken_by_event("other")
    assert not WaitingFor(WaitKind.TIMER, "act", 4, UNTIL).woken_by_event("reply")


def test_each_wait_says_what_it_waits_for_in_one_line():
    assert WaitingFor(WaitKind.TIMER, "remind", 1, UNTIL).describe() == "a timer until 2026-12-08 09:30:00 UTC"
    assert WaitingFor(WaitKind.EVENT, "act", 1, None, events=("a", "b")).describe() == "event 'a' or 'b' (no deadline)"
    assert WaitingFor(WaitKind.CHILD, "act", 1, children=("x", "y")).describe() == "2 child runs to end"


def test_a_child_is_keyed_by_parent_visit_workflow_and_key_and_the_key_fits_a_run():
    key = child_start_key("run-1", 3, "fraud-check", "ORD-1:fraud")
    assert key == child_start_key("run-1", 3, "fraud-check", "ORD-1:fraud")  # a re-executed visit: the same child
    others = {child_start_key("run-2", 3, "fraud-check", "ORD-1:fraud"), child_start_key("run-1", 4, "fraud-check",
              "ORD-1:fraud"), child_start_key("run-1", 3, "other", "ORD-1:fraud"),
              child_start_key("run-1", 3, "fraud-check", "ORD-2:fraud")}
    assert key not in others and len(others) == 4
    assert key.startswith("child:") and len(child_start_key("r" * 36, 9, "w" * 100, "k" * 200)) <= 200


def test_an_event_survives_its_round_trip_through_json():
    event = Event("reply", {"text": "yes"}, 7, "2026-12-06T10:00:00+00:00", "api:intake")
    assert Event.from_json(event.as_json()) == event
