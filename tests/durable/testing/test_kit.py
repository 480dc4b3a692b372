"""The kit's own promises: stand-ins keep their adapter's, crashes happen only where asked, the clock moves only
forward, and nothing leaves the test's process or outlives the test."""
from __future__ import annotations

from datetime import timedelta

import pytest

from durable import NonRetryableError
from durable.runtime import dispatch
from durable.testing import DurableKit
from tests.durable.ledger_workflows import probe

NAME = "test-ledger-probe"  # one side effect, `charge`, on the probe downstream, which honours Idempotency-Key


def charge(kit: DurableKit, key: str = "B-1"):
    return kit.start(NAME, {"business_key": key, "amount": "10.00"}, business_key=key).advance()


def test_a_lost_answer_is_sent_again_with_the_same_key_and_the_downstream_acts_once(durable_kit):
    stand_in = durable_kit.stand_in(probe)
    stand_in.lose_next_answer()  # it charged, then the answer timed out: ambiguous, retried with the key
    run = charge(durable_kit)  # retried once its backoff (10 ms) passed: by then, or after the clock moves past it
    durable_kit.clock.move(seconds=1)
    assert run.advance().status == "SUCCEEDED"
    [row] = run.ledger()
    assert stand_in.calls_per_key() == {row.operation_id: 2}  # the Idempotency-Key is the operation id
    assert stand_in.effects_per_key() == {row.operation_id: 1} and stand_in.duplicates() == []
    assert run.output["charge"]["ref"] == row.external_ref


def test_a_refused_call_does_nothing_and_fails_the_run(durable_kit):
    stand_in = durable_kit.stand_in("probe")  # by its registered name
    stand_in.fail_next(NonRetryableError("card declined", kind="business_rejection"))
    run = charge(durable_kit)
    assert run.status == "FAILED" and "card declined" in run.error["message"]
    assert len(stand_in.calls) == 1 and stand_in.effects == 0


def test_every_message_stays_in_the_process_and_the_adapter_is_put_back(durable_kit):
    durable_kit.stand_in(probe)
    run = charge(durable_kit)
    assert (dispatch.ADVANCE_RUN, [str(run.id)]) in durable_kit.sent
    durable_kit.close()
    assert dispatch.local_delivery is None and "execute" not in vars(probe)


def test_a_crash_is_armed_only_at_a_fault_point(durable_kit):
    with pytest.raises(ValueError, match="after_downstream"):
        durable_kit.crash_at("before_lunch")


def test_a_crash_armed_for_one_action_spares_the_others(durable_kit):
    durable_kit.stand_in(probe)
    crash = durable_kit.crash_at("after_prepare", action="refund")
    assert charge(durable_kit).status == "SUCCEEDED" and crash.fired is None


def test_the_clock_moves_forward_only(durable_kit):
    durable_kit.clock.move(days=1, hours=2)
    assert durable_kit.clock.moved == timedelta(days=1, hours=2)
    with pytest.raises(ValueError, match="only moves forward"):
        durable_kit.clock.move(timedelta(seconds=-1))


def test_a_user_holds_the_roles_asked_for(durable_kit):
    approver = durable_kit.user("ann", "approver")
    assert approver.has_perm("approvals.decide_approvalrequest") and not approver.has_perm("durable.start_run")
