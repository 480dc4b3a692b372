"""The ledger's pure rules: operation transitions, re-entry, reconciliation and ambiguous errors."""
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.errors import AmbiguousOutcome, is_ambiguous
from durable.engine.ledger import (
    DECISIONS,
    OP_TRANSITIONS,
    Capabilities,
    OperationStatus,
    Reconciliation,
    Reentry,
    after_failed_call,
    can_move,
    in_family,
    on_reentry,
    reconciliation_for,
)

Op = OperationStatus
statuses = st.sampled_from(list(Op))


# Transitions


def test_every_status_has_its_transitions_declared():
    assert set(OP_TRANSITIONS) == set(Op)


def test_a_prepared_operation_can_only_be_started():
    assert OP_TRANSITIONS[Op.PENDING] == {Op.STARTED}


def test_a_started_operation_may_be_resent_settled_or_become_unknown():
    assert OP_TRANSITIONS[Op.STARTED] == {Op.STARTED, Op.SUCCEEDED, Op.FAILED_RETRYABLE, Op.FAILED_FINAL, Op.UNKNOWN}


def test_a_retryable_failure_is_only_ever_sent_again():
    assert OP_TRANSITIONS[Op.FAILED_RETRYABLE] == {Op.STARTED}


def test_unknown_moves_only_to_an_operators_resolutions_never_back_to_started():
    assert OP_TRANSITIONS[Op.UNKNOWN] == {Op.SUCCEEDED, Op.FAILED_RETRYABLE, Op.FAILED_FINAL}
    assert not can_move(Op.UNKNOWN, Op.STARTED)
    assert not can_move(Op.UNKNOWN, Op.PENDING)


@pytest.mark.parametrize("terminal", [Op.SUCCEEDED, Op.FAILED_FINAL])
def test_succeeded_and_failed_final_are_terminal(terminal):
    assert OP_TRANSITIONS[terminal] == frozenset()
    assert not any(can_move(terminal, target) for target in Op)


def test_only_a_started_operation_can_become_unknown():
    assert {s for s in Op if can_move(s, Op.UNKNOWN)} == {Op.STARTED}


def test_nothing_goes_back_to_pending():
    assert not any(can_move(s, Op.PENDING) for s in Op)


def test_only_pending_started_and_retryable_operations_are_sent():
    assert {s for s in Op if can_move(s, Op.STARTED)} == {Op.PENDING, Op.STARTED, Op.FAILED_RETRYABLE}


@given(statuses, statuses)
def test_can_move_follows_the_table_whether_given_enums_or_their_strings(current, target):
    expected = target in OP_TRANSITIONS[current]
    assert can_move(current, target) is expected
    assert can_move(current.value, target.value) is expected


@given(st.lists(statuses, max_size=12))
def test_no_legal_walk_sends_an_unknown_operation_again_unless_it_was_resolved_as_not_happened(steps):
    """Follow every legal move of a random walk from PENDING: nothing leaves a terminal status, and
    between UNKNOWN and a later STARTED there is always the operator's FAILED_RETRYABLE."""
    walk = [Op.PENDING]
    for target in steps:
        if can_move(walk[-1], target):
            walk.append(target)
    for i, status in enumerate(walk):
        if status in (Op.SUCCEEDED, Op.FAILED_FINAL):
            assert i == len(walk) - 1
        if status is Op.UNKNOWN and Op.STARTED in walk[i:]:
            assert Op.FAILED_RETRYABLE in walk[i:walk.index(Op.STARTED, i)]


def test_unknown_statuses_are_refused():
    with pytest.raises(ValueError):
        can_move("DONE", Op.STARTED)


# Re-entry


@pytest.mark.parametrize("status,reentry", [
    (Op.SUCCEEDED, Reentry.RETURN_RECORDED),
    (Op.PENDING, Reentry.EXECUTE),
    (Op.FAILED_RETRYABLE, Reentry.EXECUTE),
    (Op.STARTED, Reentry.RECONCILE),
    (Op.FAILED_FINAL, Reentry.FAIL_STEP),
    (Op.UNKNOWN, Reentry.NEEDS_ATTENTION),
])
def test_reentry_depends_only_on_the_operations_status(status, reentry):
    assert on_reentry(status) is reentry
    assert on_reentry(status.value) is reentry


@pytest.mark.parametrize("status,reentry", [
    (Op.SUCCEEDED, Reentry.RETURN_RECORDED),  # done in run <origin>: nothing sent
    (Op.FAILED_FINAL, Reentry.FAIL_STEP),
    (Op.UNKNOWN, Reentry.NEEDS_ATTENTION),  # held until an operator resolves it
    (Op.STARTED, Reentry.WAIT_FOR_FAMILY),  # the other run's, maybe in flight: never sent beside it
    (Op.PENDING, Reentry.WAIT_FOR_FAMILY),
    (Op.FAILED_RETRYABLE, Reentry.WAIT_FOR_FAMILY),
])
def test_a_fork_meeting_its_familys_operation_sends_nothing_of_its_own(status, reentry):
    assert in_family(status) is reentry


def test_a_fork_takes_an_operators_resolution_in_its_family():
    assert in_family(Op.SUCCEEDED, resolved_by_hand=True) is Reentry.TAKE_RESOLUTION


def test_an_operation_an_operator_resolved_as_succeeded_is_taken_not_a_duplicate_prevented():
    assert on_reentry(Op.SUCCEEDED, resolved_by_hand=True) is Reentry.TAKE_RESOLUTION
    # Resolved as did not happen, then sent by the machine: its other statuses follow the usual rule.
    for status in (Op.FAILED_RETRYABLE, Op.FAILED_FINAL, Op.STARTED):
        assert on_reentry(status, resolved_by_hand=True) is on_reentry(status)


def test_a_started_operation_is_never_blindly_executed_again():
    assert on_reentry(Op.STARTED) is not Reentry.EXECUTE


@given(statuses)
def test_reentry_executes_only_what_the_machine_may_start(status):
    assert (on_reentry(status) is Reentry.EXECUTE) == (status in (Op.PENDING, Op.FAILED_RETRYABLE))


# Reconciliation of a STARTED operation


@pytest.mark.parametrize("keys,lookup,how", [
    (True, False, Reconciliation.RETRY_SAME_KEY),
    (True, True, Reconciliation.RETRY_SAME_KEY),  # the key is the cheaper proof: no lookup needed
    (False, True, Reconciliation.LOOK_UP),
    (False, False, Reconciliation.UNKNOWN),
])
def test_reconciliation_follows_what_the_downstream_promises(keys, lookup, how):
    assert reconciliation_for(Capabilities(honours_idempotency_keys=keys, can_lookup=lookup)) is how


def test_a_downstream_that_promises_nothing_is_reconciled_as_unknown():
    assert reconciliation_for(Capabilities()) is Reconciliation.UNKNOWN


def test_the_decisions_recorded_are_where_a_path_ends_never_the_path_to_a_lookup():
    assert DECISIONS == {Reconciliation.RETRY_SAME_KEY, Reconciliation.FOUND, Reconciliation.NOT_FOUND,
                         Reconciliation.UNKNOWN}
    assert {str(decision) for decision in DECISIONS} == {"retry_same_key", "found", "not_found", "unknown"}


# What a call that raised leaves behind

KEYS, LOOKUP, BLIND = Capabilities(honours_idempotency_keys=True), Capabilities(can_lookup=True), Capabilities()


@pytest.mark.parametrize("retryable,status", [(True, Op.FAILED_RETRYABLE), (False, Op.FAILED_FINAL)])
@pytest.mark.parametrize("capabilities", [KEYS, LOOKUP, BLIND])
def test_an_answer_to_a_first_send_says_it_did_not_happen(retryable, status, capabilities):
    assert after_failed_call(answered=True, retryable=retryable, may_have_happened=False,
                             capabilities=capabilities) is status


@pytest.mark.parametrize("capabilities,status", [(KEYS, Op.STARTED), (LOOKUP, Op.STARTED), (BLIND, Op.UNKNOWN)])
@pytest.mark.parametrize("may_have_happened", [False, True])
def test_a_call_that_may_have_been_applied_is_reconciled_or_unknown(capabilities, status, may_have_happened):
    assert after_failed_call(answered=False, retryable=True, may_have_happened=may_have_happened,
                             capabilities=capabilities) is status


def test_a_429_or_503_to_a_resend_says_nothing_of_the_earlier_attempt():
    assert after_failed_call(answered=True, retryable=True, may_have_happened=True, capabilities=KEYS) is Op.STARTED


def test_a_final_refusal_of_a_resend_settles_it_the_key_would_have_returned_the_earlier_answer():
    assert after_failed_call(answered=True, retryable=False, may_have_happened=True,
                             capabilities=KEYS) is Op.FAILED_FINAL


@given(answered=st.booleans(), retryable=st.booleans(), may_have_happened=st.booleans(),
       keys=st.booleans(), lookup=st.booleans())
def test_a_call_is_only_failed_when_nothing_earlier_or_now_may_have_happened(answered, retryable, may_have_happened,
                                                                              keys, lookup):
    status = after_failed_call(answered=answered, retryable=retryable, may_have_happened=may_have_happened,
                               capabilities=Capabilities(honours_idempotency_keys=keys, can_lookup=lookup))
    if status is Op.FAILED_RETRYABLE:
        assert answered and not may_have_happened
    assert status in (Op.FAILED_RETRYABLE, Op.FAILED_FINAL, Op.STARTED, Op.UNKNOWN)


# Ambiguous errors: the request may have been applied


REQUEST = httpx.Request("POST", "http://downstream.test/refunds")


def status_error(status):
    return httpx.HTTPStatusError(str(status), request=REQUEST, response=httpx.Response(status, request=REQUEST))


@pytest.mark.parametrize("exc", [
    httpx.ReadTimeout("no answer in time", request=REQUEST),
    httpx.WriteTimeout("body half sent", request=REQUEST),
    httpx.RemoteProtocolError("Server disconnected without sending a response.", request=REQUEST),
    httpx.ReadError("connection reset", request=REQUEST),
    httpx.WriteError("broken pipe", request=REQUEST),
    TimeoutError(),
    AmbiguousOutcome("gateway said maybe"),
], ids=lambda e: type(e).__name__)
def test_errors_after_the_request_may_have_been_sent_are_ambiguous(exc):
    assert is_ambiguous(exc) is True


@pytest.mark.parametrize("exc", [
    httpx.ConnectError("connection refused", request=REQUEST),
    httpx.ConnectTimeout("no connection in time", request=REQUEST),
    httpx.PoolTimeout("no free connection", request=REQUEST),
    status_error(503),
    status_error(429),
    status_error(400),
    ValueError("bad amount"),
], ids=lambda e: f"{type(e).__name__}-{getattr(getattr(e, 'response', None), 'status_code', '')}")
def test_errors_before_sending_or_with_an_answer_are_not_ambiguous(exc):
    assert is_ambiguous(exc) is False


def test_a_subclass_of_an_ambiguous_error_is_ambiguous_too():
    class SlowGateway(httpx.ReadTimeout):
        pass

    assert is_ambiguous(SlowGateway("slow", request=REQUEST)) is True
