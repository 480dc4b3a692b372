"""Approvals per visit (docs/approvals.md, "Approvals per visit"): each request belongs to its visit and its place in
it, and an approval the run acted on is not revalidated against the run's own action when the visit runs again."""
import pytest

from approvals.models import ApprovalRequest
from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run
from durable.runtime.fault_points import AFTER_COMMIT
from tests.approvals.flow import decide
from tests.durable.claims import advance
from tests.durable.ledger_workflows import crash_at, expire_lease, probe

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight


@pytest.fixture(autouse=True)
def _probe():
    probe.reset()
    yield
    probe.reset()


def start(workflow: str, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input=given, business_key="ORD-5")
    return run


def waiting(run: Run) -> ApprovalRequest:
    run = advance(run)
    assert run.status == RunStatus.WAITING_APPROVAL, run.error
    return ApprovalRequest.objects.get(run=run, status="PENDING")


def test_two_approvals_in_one_step_settle_each_on_its_own(ann, bob):
    run = start("test-two-approvals")
    refund = waiting(run)
    assert (refund.kind, refund.visit, refund.position) == ("refund", 0, 1)
    decide(refund, ann)
    goodwill = waiting(run)  # the first holds; the step goes on to its second request
    assert (goodwill.kind, goodwill.visit, goodwill.position) == ("goodwill", 0, 2)
    decide(goodwill, bob)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["approved"] == [str(refund.id), str(goodwill.id)]
    statuses = dict(ApprovalRequest.objects.filter(run=run).values_list("kind", "status"))
    assert statuses == {"refund": "APPROVED", "goodwill": "APPROVED"}  # neither invalidated the other
    assert ApprovalRequest.objects.filter(run=run).count() == 2  # and neither was asked again


def test_each_visit_of_a_loop_asks_its_own_approval(ann):
    run = start("test-approval-loop", rounds=2)
    first = waiting(run)
    decide(first, ann)
    second = waiting(run)
    assert second.id != first.id and (first.visit, second.visit) == (0, 1) and second.snapshot["round"] == 2
    decide(second, ann)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["approved"] == [str(first.id), str(second.id)]


def test_a_visit_run_again_after_the_approved_refund_keeps_its_approval_and_does_not_refund_twice(ann, monkeypatch):
    """Approve, refund, crash after the refund's commit and before the checkpoint: the visit runs again. Its
    revalidation would now find the order refunded (by this very run); the verdict recorded before acting is
    taken instead, and the refund is the recorded one."""
    run = start("test-approve-then-refund")
    request = waiting(run)
    decide(request, ann)
    crash_at(monkeypatch, AFTER_COMMIT, "refund")
    with pytest.raises(BaseException, match="after_commit"):
        advance(run)
    request.refresh_from_db()
    assert request.used_at is not None and len(probe.calls) == 1
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    request.refresh_from_db()
    assert request.status == "APPROVED"  # not invalidated against the run's own refund
    assert len(probe.calls) == 1 and run.output["refund"]["external_ref"] == "probe-1"
    used = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.APPROVAL, detail__event="approval_used")
    assert used.count() == 1  # revalidated once, before acting


def test_an_approval_whose_facts_moved_before_the_run_acted_is_still_invalidated(ann):
    """What the recorded verdict does not cover: a refund made elsewhere before the run acts still invalidates."""
    run = start("test-approve-then-refund")
    request = waiting(run)
    decide(request, ann)
    probe.calls.append(("by-hand", "ORD-5", {}))  # refunded by hand meanwhile
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == "approval_invalidated"
    request.refresh_from_db()
    assert request.status == "INVALIDATED" and request.used_at is None
