"""Tools touch only what they created (invariant 14): a tool's sweeper sees only its own runs, production's none of them."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import expire_due
from durable import services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from durable.runtime import sweeper
from durable.tools.workload import retire, scope_env, tool_account
from reconciliation.sweeper import stale_operations
from tests.approvals.flow import waiting_claim

pytestmark = pytest.mark.django_db


def ago(seconds):
    return timezone.now() - timedelta(seconds=seconds)


def due_run(user=None, key="k"):
    """A run whose worker died: RUNNING, its lease expired a minute ago, last sent long ago."""
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key=key, user=user)
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING, lease_owner="dead-worker",
                                         lease_expires_at=ago(60), enqueued_at=ago(600), fencing_token=1)
    return run


def stale_started(run, action="ticket"):
    """An operation left STARTED an hour ago: the reconciler's work."""
    row = SideEffect.objects.create(operation_id=f"{run.id.hex[:24]}{action[:8]:0<8}", run=run, step="s",
                                    action_name=action, downstream="tickets", business_key=run.business_key,
                                    request_hash="h", status=Op.STARTED)
    SideEffect.objects.filter(pk=row.pk).update(updated_at=ago(3600))
    return row


@pytest.fixture
def tools():
    """Two tool invocations (a drill and a benchmark, say) and a person, sharing one database."""
    return tool_account("drill"), tool_account("bench"), User.objects.create_user("ops-person")


def test_a_tools_sweeper_resends_only_the_runs_its_own_account_started(settings, sent, tools):
    drill, bench, person = tools
    own = due_run(drill)
    due_run(bench), due_run(person), due_run(None)  # another tool's, a person's, the machine's
    settings.DURABLE_SCOPE_CREATED_BY = drill.pk
    assert sweeper.sweep() == [own.id]
    assert sent == [own.id]


def test_productions_sweeper_leaves_every_tools_runs_to_that_tool(settings, sent, tools):
    drill, bench, person = tools
    due_run(drill), due_run(bench)
    ours = {due_run(person).id, due_run(None).id}
    settings.DURABLE_SCOPE_CREATED_BY = None
    assert set(sweeper.sweep()) == ours == set(sent)


def test_a_tools_reconciler_looks_only_at_its_own_runs_operations(settings, tools):
    drill, bench, person = tools
    own, _ = stale_started(due_run(drill, "own")), stale_started(due_run(bench, "b"))
    production = {stale_started(due_run(person, "p")).pk, stale_started(due_run(None, "m")).pk}
    settings.DURABLE_RECONCILE_AFTER_SECONDS = 0
    settings.DURABLE_SCOPE_CREATED_BY = drill.pk
    assert [row.pk for row in stale_operations()] == [own.pk]
    settings.DURABLE_SCOPE_CREATED_BY = None
    assert {row.pk for row in stale_operations()} == production


def test_a_tools_sweeper_expires_only_its_own_runs_approvals(settings, demo, tools):
    drill, _, person = tools
    own_run, own = waiting_claim("ORD-1001", starter=drill)
    _, foreign = waiting_claim("ORD-1002", starter=person)
    ApprovalRequest.objects.update(expires_at=ago(1))
    settings.DURABLE_SCOPE_CREATED_BY = drill.pk
    assert expire_due() == [own.id]
    foreign.refresh_from_db()
    assert foreign.status == "PENDING"
    settings.DURABLE_SCOPE_CREATED_BY = None
    assert expire_due() == [foreign.id]


def test_a_tool_account_scopes_its_workers_and_cannot_sign_in_once_retired(tools):
    drill, bench, _ = tools
    assert scope_env(drill) == {"DURABLE_SCOPE_CREATED_BY": str(drill.pk)}
    assert drill.username.startswith("durable-tool-drill-") and drill.username != tool_account("drill").username
    assert not drill.has_usable_password()
    retire(drill)
    drill.refresh_from_db()
    assert not drill.is_active
