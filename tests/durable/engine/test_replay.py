import pytest

from durable.engine.errors import ReplayContractViolation
from durable.engine.fingerprint import StepShape, topology_fingerprint
from durable.engine.replay import Mismatch, RecordedCall, ReplayCursor, history_goes_past, payload_difference


def test_recorded_calls_are_returned_in_order_then_live_calls_follow():
    cursor = ReplayCursor("plan", [RecordedCall(0, "llm", {"a": 1})])
    assert cursor.next_call("llm") == (0, RecordedCall(0, "llm", {"a": 1}))
    assert cursor.next_call("read") == (1, None)
    assert cursor.replayed_all


def test_a_changed_call_order_is_a_replay_contract_violation():
    cursor = ReplayCursor("plan", [RecordedCall(0, "llm", 1), RecordedCall(1, "read", 2)])
    with pytest.raises(ReplayContractViolation, match="call #0: history recorded 'llm', the code now asks 'read'"):
        cursor.next_call("read")
    assert cursor.mismatch == Mismatch("plan", 0, "call", "call #0", "llm", "read")


def test_the_cursor_keeps_the_visit_s_first_mismatch():
    cursor = ReplayCursor("plan", [], visit=4)
    first = Mismatch("plan", 4, "side_effect", "side effect 'email' for T-1", {"s": "a"}, {"s": "b"})
    assert cursor.mismatched(first).mismatch == first
    cursor.mismatched(Mismatch("plan", 4, "call", "call #1", "x", "y"))
    assert cursor.mismatch == first


def test_a_payload_difference_names_only_the_keys_that_changed():
    recorded = {"to": "ann@example.com", "subject": "About your refund", "cc": "x"}
    new = {"to": "ann@example.com", "subject": "Your refund is on its way", "bcc": "y"}
    assert payload_difference(recorded, new) == (
        {"bcc": "<absent>", "cc": "x", "subject": "About your refund"},
        {"bcc": "y", "cc": "<absent>", "subject": "Your refund is on its way"})
    assert payload_difference([1], [2]) == ([1], [2])


def test_a_mismatch_says_where_and_what_both_ways_with_long_values_cut():
    mismatch = Mismatch("notify", 3, "side_effect", "side effect 'email' for T-1", {"s": "a"}, {"s": "b" * 500})
    assert mismatch.message.startswith("step 'notify' (visit 3) side effect 'email' for T-1: history recorded "
                                       "{'s': 'a'}, the code now asks {'s': 'bbb")
    assert len(mismatch.as_json()["new"]["s"]) == 203


def test_fingerprint_changes_with_order_names_and_side_effects():
    base = [StepShape("plan"), StepShape("pay", ("refund",))]
    assert topology_fingerprint(base) == topology_fingerprint(list(base))
    assert topology_fingerprint(base) != topology_fingerprint(list(reversed(base)))
    assert topology_fingerprint(base) != topology_fingerprint([StepShape("plan"), StepShape("pay")])
    assert topology_fingerprint(base) != topology_fingerprint([StepShape("planner"), StepShape("pay", ("refund",))])


def test_history_goes_past_a_point_an_earlier_execution_recorded_beyond():
    fresh = ReplayCursor("notify", [])
    assert not history_goes_past(fresh, set(), set(), 0)
    assert history_goes_past(fresh, {"op-email"}, set(), 0)  # it sent an email this execution has not asked yet
    fresh.prepared.add("op-email")
    assert not history_goes_past(fresh, {"op-email"}, set(), 0)  # ...asked now: the patch point is past it
    assert history_goes_past(fresh, set(), {1}, 0) and not history_goes_past(fresh, set(), {1}, 1)
    assert history_goes_past(fresh, set(), set(), 0, parked_at=0)  # it parked on a wait at or after this point
    recorded = ReplayCursor("notify", [RecordedCall(0, "llm", 1)])
    assert history_goes_past(recorded, set(), set(), 0)
    recorded.next_call("llm")
    assert not history_goes_past(recorded, set(), set(), 0)
