"""Untrusted text never chooses the object of a side effect (durable/engine/untrusted.py, invariant 13)."""
import pytest

from durable.engine.untrusted import UntrustedOutputRefused, bound_to_run


def test_an_answer_that_agrees_or_names_nothing_gives_the_runs_own_value():
    assert bound_to_run("ORD-1", expected="ORD-1", what="order") == "ORD-1"
    assert bound_to_run(None, expected="ORD-1", what="order") == "ORD-1"


def test_an_answer_naming_another_object_is_refused_for_good_saying_both():
    with pytest.raises(UntrustedOutputRefused) as refused:
        bound_to_run("ORD-9", expected="ORD-1", what="order", source="the planner")
    assert (refused.value.kind, refused.value.retryable) == ("llm_output_mismatch", False)
    assert str(refused.value).startswith("the planner proposed order 'ORD-9', but this run is for order 'ORD-1'")
