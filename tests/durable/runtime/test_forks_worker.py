"""Forks with a real worker process (issue 39, "Proof"): a fork from the checkpoint before the refund of a claim that
refunded calls the payments downstream zero times and says the refund was done in run <origin>; a fork of that fork
likewise. The in-process specification of forks is tests/durable/test_forks.py."""
from __future__ import annotations

import pytest

from durable import forks, services
from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from tests.conftest import user_with_roles
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

CLAIM = {"order_id": "ORD-1001", "customer_message": "ORD-1001 arrived broken. I would like a refund please."}


def ended(run_id) -> Run:
    wait_for(lambda: status_of(run_id) in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.NEEDS_ATTENTION),
             what=f"run {run_id} to end")
    return Run.objects.get(id=run_id)


def payments_calls(sandbox) -> int:
    return sandbox.state.calls_snapshot()["payments"]["calls"]


def before_the_refund(run: Run) -> int:
    return Checkpoint.objects.get(run=run, next_step="payment").seq


def test_a_fork_and_a_fork_of_it_before_the_refund_call_the_payments_downstream_zero_times(session_worker, demo):
    operator = user_with_roles("fork-operator", "operator")
    run, _ = services.start_run(workflow="claims-agent", version=1, input=CLAIM, business_key="ORD-1001",
                                allow_older_version=True)
    origin = ended(run.id)
    assert origin.status == RunStatus.SUCCEEDED, origin.error
    assert payments_calls(demo) == 1 and len(demo.state.list_refunds()) == 1

    fork = forks.fork_run(run_id=origin.id, seq=before_the_refund(origin), user=operator, source="api",
                          reason="the refund step's prompt was fixed")
    fork = ended(fork.id)
    second = forks.fork_run(run_id=fork.id, seq=before_the_refund(fork), user=operator, source="console",
                            reason="once more, from the fork")
    second = ended(second.id)

    for forked in (fork, second):
        assert forked.status == RunStatus.SUCCEEDED, forked.error
        assert forked.output["refund_id"] == origin.output["refund_id"]  # the origin's record, answered
        done_in = dict(JournalEntry.objects.filter(run=forked, kind=JournalEntry.Kind.DUPLICATE_PREVENTED)
                       .values_list("name", "detail__done_in_run"))
        assert done_in == {"refund": str(origin.id), "ticket": str(origin.id), "notify": str(origin.id)}
    assert payments_calls(demo) == 1 and len(demo.state.list_refunds()) == 1  # zero calls from either fork
    assert (second.family_root, second.forked_from_id) == (origin.id, fork.id)
    assert SideEffect.objects.filter(action_name="refund").count() == 1  # one ledger row for the family
