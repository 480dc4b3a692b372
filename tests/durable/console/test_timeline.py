"""The run timeline selector: every recorded event of a run, merged in time order, in product words."""
import pytest

from durable import services, versions
from durable.console.timeline import EntryKind, run_timeline
from durable.engine.states import RunStatus
from durable.models import Checkpoint, Run
from durable.registry import registry
from durable.runtime import executor
from tests.approvals.flow import decide, waiting_claim
from tests.conftest import make_user
from tests.durable import version_workflows as vw
from tests.durable.claims import advance, make_retry_due, needs_attention

pytestmark = pytest.mark.django_db
K = EntryKind


def kinds(entries):
    return [e.kind for e in entries]


def test_an_approved_claim_reads_checkpoints_activities_approval_audit_and_side_effects_in_order(demo):
    run, request = waiting_claim()
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    entries = run_timeline(advance(run))
    assert kinds(entries)[:14] == [
        K.CHECKPOINT, K.ACTIVITY, K.CHECKPOINT, K.ACTIVITY, K.CHECKPOINT, K.CHECKPOINT,  # planner, lookup, risk
        K.APPROVAL, K.OPERATOR, K.APPROVAL, K.APPROVAL, K.CHECKPOINT,  # asked, approved, used
        K.SIDE_EFFECT, K.SIDE_EFFECT, K.CHECKPOINT,  # refund prepared, refund SUCCEEDED, payment done
    ]
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    summaries = [e.summary for e in entries]
    assert summaries[0] == "checkpoint #0: run started → planner"
    assert summaries[1] == "activity llm.plan #0 recorded" and entries[1].step == "planner"
    assert entries[1].detail == run.journal.get(name="llm.plan").result  # the recorded result itself
    assert summaries[6:10] == ["approval asked", "ann approve (PENDING → APPROVED) from test",
                               "approval approved by ann", "approval used after revalidation"]
    assert {e.approval_id for e in entries if e.kind == K.APPROVAL} == {str(request.id)}
    assert entries[6].status == "APPROVED"  # the request as it is now
    refund = run.side_effects.get(action_name="refund")
    assert summaries[11:13] == ["side effect refund prepared", f"side effect refund → SUCCEEDED ({refund.external_ref})"]
    assert (entries[11].operation_id, entries[11].status, entries[11].reconcile) == (refund.operation_id, "SUCCEEDED",
                                                                                    False)
    assert summaries[-1] == "checkpoint #7: notify done → end"
    assert [e.checkpoint_seq for e in entries if e.kind == K.CHECKPOINT] == list(range(8))


def test_an_unknown_side_effect_and_the_wait_for_an_operator_link_to_reconciliation(demo):
    run, operation = needs_attention(demo)
    entries = [e for e in run_timeline(run) if e.operation_id == operation.operation_id]
    assert [(e.kind, e.summary) for e in entries] == [
        (K.SIDE_EFFECT, "side effect notify prepared"),
        (K.SIDE_EFFECT, "side effect notify → UNKNOWN"),
        (K.NEEDS_ATTENTION, entries[-1].summary),
    ]
    assert entries[-1].summary.startswith("needs attention: ")
    assert entries[0].status == "UNKNOWN" and all(e.reconcile for e in entries)
    settled = [e for e in run_timeline(run) if e.kind == K.SIDE_EFFECT and e.operation_id != operation.operation_id]
    assert settled and not any(e.reconcile for e in settled)


def test_a_retry_and_a_failure_say_the_attempt_and_the_error(calls_file):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": calls_file, "fail_times": 2},
                                business_key="k")
    executor.advance(run.id)
    make_retry_due(run)
    executor.advance(run.id)
    retries = [e.summary for e in run_timeline(run) if e.kind == K.RETRY]
    assert [r.split("; retry in ")[0] for r in retries] == [
        "attempt 1 failed: transient: downstream briefly unavailable",
        "attempt 2 failed: transient: downstream briefly unavailable",
    ]
    assert all(r.endswith(" s") for r in retries)
    failing, _ = services.start_run(workflow="test-counting", business_key="k2",
                                    input={"calls_file": calls_file + "2", "fail_times": 1, "fail_kind": "final"})
    executor.advance(failing.id)
    [failure] = [e for e in run_timeline(failing) if e.kind == K.FAILURE]
    assert failure.summary == "failed at attempt 1: invalid_request: invalid parameters" and failure.step == "s2"


def test_a_blocked_run_shows_the_refusal_and_the_audited_migration(monkeypatch):
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="b", allow_older_version=True)
    Run.objects.filter(id=run.id).update(current_step="b")
    Checkpoint.objects.filter(run=run).update(next_step="b")
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    executor.advance(run.id)
    versions.migrate_run(run_id=run.id, to_version=2, user=make_user("mia"), source="console", reason="v2 is out")
    entries = run_timeline(Run.objects.get(id=run.id))
    assert kinds(entries) == [K.CHECKPOINT, K.BLOCKED, K.CHECKPOINT, K.OPERATOR]
    assert entries[1].summary.startswith("blocked on the replay contract: version_missing: this worker has no")
    assert entries[2].summary == "checkpoint #1: migration v1->v2 done → risk"
    assert entries[3].summary == "mia migrate_version (BLOCKED_VERSION → PENDING) from console: v2 is out"
    assert entries[3].detail["after"] == {"workflow_version": 2, "step": "risk"}


def test_an_operator_action_by_the_machine_is_shown_as_system():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="k")
    services.cancel_run(run_id=run.id, user=None, source="command")
    assert run_timeline(run)[-1].summary == "system cancel (PENDING → CANCELLED) from command"


def test_a_new_run_has_only_its_first_checkpoint():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="k")
    assert [(e.kind, e.summary) for e in run_timeline(run)] == [(K.CHECKPOINT, "checkpoint #0: run started → step1")]
    assert run.status == RunStatus.PENDING
