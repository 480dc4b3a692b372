import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.states import (
    CLAIMABLE,
    PAUSABLE_AT_ONCE,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    RunStatus,
    can_transition,
    check_transition,
    checked_sources,
    sources_of,
)


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


@given(st.sampled_from(list(RunStatus)), st.sampled_from(list(RunStatus)))
def test_a_move_the_table_forbids_is_an_error_of_its_own_and_one_it_allows_passes(current, target):
    if can_transition(current, target):
        check_transition(current, target)
        assert current in checked_sources(target, {current})
    else:
        with pytest.raises(IllegalTransition) as refused:
            checked_sources(target, {current})
        assert (refused.value.current, refused.value.target) == (current, target)
        assert f"a run that is {current} cannot move to {target}" in str(refused.value)


def test_checked_sources_without_sources_is_every_one_the_table_allows():
    assert checked_sources(RunStatus.PENDING) == sources_of(RunStatus.PENDING)
    assert checked_sources(RunStatus.RUNNING) == {RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING_RETRY}


def test_every_status_a_worker_claims_from_may_move_to_running():
    assert CLAIMABLE <= sources_of(RunStatus.RUNNING)


def test_a_worker_may_move_the_run_it_holds_to_any_status():
    assert TRANSITIONS[RunStatus.RUNNING] == frozenset(RunStatus)


def test_only_the_sweepers_reconciler_holds_a_run_no_worker_holds_for_an_operator():
    assert sources_of(RunStatus.NEEDS_ATTENTION) == {RunStatus.RUNNING, RunStatus.PENDING, RunStatus.WAITING_RETRY}


def test_every_wait_and_hold_ends_in_pending_and_nothing_ended_goes_anywhere_but_a_retry():
    held = {RunStatus.WAITING, RunStatus.WAITING_APPROVAL, RunStatus.WAITING_RETRY, RunStatus.NEEDS_ATTENTION,
            RunStatus.BLOCKED_VERSION, RunStatus.FAILED, RunStatus.PAUSED}
    assert held <= sources_of(RunStatus.PENDING)
    assert sources_of(RunStatus.PENDING) == held | {RunStatus.RUNNING}
    assert not any(RunStatus.SUCCEEDED in TRANSITIONS[s] for s in set(RunStatus) - {RunStatus.RUNNING})


def test_a_paused_run_only_resumes_or_is_cancelled():
    assert TRANSITIONS[RunStatus.PAUSED] == {RunStatus.PENDING, RunStatus.CANCELLED}


def test_a_pause_moves_at_once_only_runs_no_worker_holds_and_no_operator_must_look_at():
    assert PAUSABLE_AT_ONCE <= sources_of(RunStatus.PAUSED)
    assert sources_of(RunStatus.PAUSED) == PAUSABLE_AT_ONCE | {RunStatus.RUNNING}  # RUNNING: its worker, fenced
    assert not PAUSABLE_AT_ONCE & (TERMINAL | {RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION})
    assert RunStatus.PAUSED not in CLAIMABLE  # no worker takes a paused run, whatever the sweeper sends
