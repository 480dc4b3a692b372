"""Approval rules without a database: statuses, quorum, separation of duties, what changed."""
import pytest

from durable.engine.approvals import (
    ApprovalStatus,
    DecisionRefused,
    Revalidation,
    Tally,
    Verdict,
    can_move,
    check_decider,
    differences,
    object_hash,
    snapshot_hash,
)


def test_only_a_pending_request_is_decided_and_an_approved_one_can_still_be_invalidated():
    assert can_move("PENDING", "APPROVED") and can_move("PENDING", "EXPIRED")
    assert can_move("APPROVED", "INVALIDATED")
    for final in ("REJECTED", "EXPIRED", "INVALIDATED"):
        assert not any(can_move(final, target) for target in ApprovalStatus)
    assert not can_move("APPROVED", "REJECTED")


def test_one_approval_approves_a_request_that_needs_one():
    assert Tally(required=1).outcome_of(Verdict.APPROVE) == ApprovalStatus.APPROVED


def test_a_request_that_needs_two_approvers_stays_pending_after_the_first():
    assert Tally(required=2).outcome_of(Verdict.APPROVE) == ApprovalStatus.PENDING
    assert Tally(required=2, approvers=frozenset({"ann"})).outcome_of(Verdict.APPROVE) == ApprovalStatus.APPROVED


def test_one_rejection_rejects_whatever_the_approvals_so_far():
    assert Tally(required=2, approvers=frozenset({"ann"})).outcome_of(Verdict.REJECT) == ApprovalStatus.REJECTED


def test_the_user_who_started_the_run_cannot_decide_it():
    with pytest.raises(DecisionRefused) as refused:
        check_decider(user="ann", run_starter="ann", tally=Tally(1), verdict=Verdict.APPROVE)
    assert refused.value.code == "self_approval"
    with pytest.raises(DecisionRefused):
        check_decider(user="ann", run_starter="ann", tally=Tally(1), verdict=Verdict.REJECT)


def test_the_same_approver_does_not_count_twice():
    with pytest.raises(DecisionRefused) as refused:
        check_decider(user="ann", run_starter="bob", tally=Tally(2, frozenset({"ann"})), verdict=Verdict.APPROVE)
    assert refused.value.code == "same_approver"
    check_decider(user="cid", run_starter="bob", tally=Tally(2, frozenset({"ann"})), verdict=Verdict.APPROVE)
    check_decider(user="ann", run_starter=None, tally=Tally(1), verdict=Verdict.APPROVE)  # a machine started it


def test_hashes_ignore_key_order_and_tell_snapshot_from_object():
    assert snapshot_hash({"a": 1, "b": "2"}) == snapshot_hash({"b": "2", "a": 1})
    assert snapshot_hash({"amount": "1"}) != snapshot_hash({"amount": "2"})
    assert snapshot_hash({"a": 1}) != object_hash({"a": 1})


def test_differences_name_each_changed_key_with_then_and_now():
    changed = differences({"amount": "120.00", "refunded_amount": "0.00", "customer": "Ada"},
                          {"amount": "150.00", "refunded_amount": "0.00", "customer": "Ada", "note": "x"})
    assert [(d.key, d.then, d.now) for d in changed] == [("amount", "120.00", "150.00"), ("note", None, "x")]


def test_a_revalidation_holds_when_it_found_no_problem():
    assert Revalidation(current={}).holds
    assert not Revalidation(current={}, problems=("refunded",)).holds


def test_what_a_revalidation_read_is_kept_as_a_storable_copy():
    # A business read is a fact: recorded on the request and in the journal whatever it holds (json_values).
    check = Revalidation(current={"note": "refunded\x00", "amount": float("nan")}, problems=("moved \ud800",))
    assert check.current == {"note": "refunded\ufffd", "amount": None}
    assert check.problems == ("moved \ufffd",) and not check.holds
    clean = {"amount": "120.00"}
    assert Revalidation(current=clean).current is clean
