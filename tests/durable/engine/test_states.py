import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.states import TERMINAL, TRANSITIONS, RunStatus, can_transition, sources_of


@pytest.mark.parametrize("terminal", [RunStatus.SUCCEEDED, RunStatus.CANCELLED])
def test_finished_runs_never_move_again(terminal):
    assert not any(can_transition(terminal, target) for target in RunStatus)


def test_a_failed_run_may_only_be_retried():
    assert TRANSITIONS[RunStatus.FAILED] == {RunStatus.PENDING}


def test_every_non_terminal_run_can_be_cancelled():
    assert all(can_transition(s, RunStatus.CANCELLED) for s in set(RunStatus) - TERMINAL)


@given(st.sampled_from(list(RunStatus)), st.sampled_from(list(RunStatus)))
def test_sources_of_agrees_with_can_transition(source, target):
    assert (source in sources_of(target)) == can_transition(source, target)
