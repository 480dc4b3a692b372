import pytest

from durable.engine.errors import ReplayContractViolation
from durable.engine.fingerprint import StepShape, topology_fingerprint
from durable.engine.replay import RecordedCall, ReplayCursor


def test_recorded_calls_are_returned_in_order_then_live_calls_follow():
    cursor = ReplayCursor("plan", [RecordedCall(0, "llm", {"a": 1})])
    assert cursor.next_call("llm") == (0, RecordedCall(0, "llm", {"a": 1}))
    assert cursor.next_call("read") == (1, None)
    assert cursor.replayed_all


def test_a_changed_call_order_is_a_replay_contract_violation():
    cursor = ReplayCursor("plan", [RecordedCall(0, "llm", 1), RecordedCall(1, "read", 2)])
    with pytest.raises(ReplayContractViolation, match="call #0 is 'read' but history recorded 'llm'"):
        cursor.next_call("read")


def test_fingerprint_changes_with_order_names_and_side_effects():
    base = [StepShape("plan"), StepShape("pay", ("refund",))]
    assert topology_fingerprint(base) == topology_fingerprint(list(base))
    assert topology_fingerprint(base) != topology_fingerprint(list(reversed(base)))
    assert topology_fingerprint(base) != topology_fingerprint([StepShape("plan"), StepShape("pay")])
    assert topology_fingerprint(base) != topology_fingerprint([StepShape("planner"), StepShape("pay", ("refund",))])
