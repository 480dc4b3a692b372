"""The worker's side of an approval (approvals/gate.py): what a step asks for must be storable as asked."""
import pytest

from approvals.models import ApprovalRequest
from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight, as in production


@pytest.mark.parametrize("poison", ["nul", "surrogate", "nan"])
@pytest.mark.parametrize("where, what", [("snapshot", "the snapshot of approval 'refund'"),
                                         ("approve", "what approval 'refund' approves")])
def test_a_snapshot_the_database_cannot_store_is_refused_before_anyone_is_asked(poison, where, what):
    run, _ = services.start_run(workflow="test-unstorable", input={"poison": poison, "where": where}, business_key="p")
    run = advance(run)
    assert run.status == RunStatus.FAILED, run.error
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("snapshot_not_storable", False, "poison")
    assert run.error["message"].startswith(f"{what} cannot be stored: field note must ")
    assert not ApprovalRequest.objects.filter(run=run).exists()  # nobody was asked to approve it
    assert not JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.APPROVAL).exists()
    assert run.checkpoint_seq == 1

