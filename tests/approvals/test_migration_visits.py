"""approvals/migrations/0003_visits.py on requests made before visits existed: each gets the visit it was asked
in, and one the run already acted on is marked used, so its visit run again does not revalidate it."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from approvals.models import ApprovalRequest
from durable import services
from durable.models import Checkpoint, JournalEntry

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE, AFTER = [("approvals", "0002_overview")], [("approvals", "0003_visits")]


def migrate(to):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(to)
    return executor.loader.project_state(to).apps


def old_request(apps, run, step: str, status: str):
    now = timezone.now()
    return apps.get_model("approvals", "ApprovalRequest").objects.create(
        run_id=run.id, step=step, kind="refund", workflow_name=run.workflow_name, workflow_version=1,
        business_key=run.business_key, snapshot={}, snapshot_hash="s", approval_object={}, object_hash="o",
        revalidate="m:f", on_invalid="fail", on_expiry="fail", status=status, expires_at=now)


def test_requests_made_before_visits_get_their_visit_and_the_ones_acted_on_are_marked_used():
    run, _ = services.start_run(workflow="test-approval-loop", input={}, business_key="MIG-1")
    Checkpoint.objects.create(run=run, seq=1, step="ask_each_time", next_step="finish_asking", state={},
                              state_schema_version=1, created_at=timezone.now())
    try:
        old = migrate(BEFORE)
        acted_on = old_request(old, run, "ask_each_time", "APPROVED")
        waiting = old_request(old, run, "finish_asking", "PENDING")
        JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.APPROVAL, step="ask_each_time",
                                    detail={"event": "approval_used", "request": str(acted_on.id)},
                                    created_at=timezone.now())
    finally:
        migrate(AFTER)
    acted_on, waiting = ApprovalRequest.objects.get(id=acted_on.id), ApprovalRequest.objects.get(id=waiting.id)
    assert (acted_on.visit, acted_on.position, waiting.visit, waiting.position) == (0, 1, 1, 1)
    assert acted_on.used_at is not None and waiting.used_at is None
