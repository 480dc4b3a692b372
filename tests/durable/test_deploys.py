"""A deploy lands while a run waits for approval (invariants 7 and 8, docs/invariants.md), on real worker processes.

Deploy 1 has lookup -> approval -> payment; deploy 2 inserts risk_check. A worker loads only
the versions it was deployed with (DURABLE_WORKFLOW_MODULES).
"""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalRequest
from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run
from durable.store.checkpoints import state_at
from durable.tools.processes import WorkerProcess
from tests.approvals.flow import decide
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.deploys.steps import NAME
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

V1_ONLY = {"DURABLE_WORKFLOW_MODULES": "tests.durable.deploys.v1"}
V2_ONLY = {"DURABLE_WORKFLOW_MODULES": "tests.durable.deploys.v2"}
V1_AND_V2 = {"DURABLE_WORKFLOW_MODULES": "tests.durable.deploys.v1,tests.durable.deploys.v2"}


def paused_v1_run(worker_log_dir) -> tuple[Run, ApprovalRequest]:
    """A v1 run, started before deploy 2, waiting at its approval; the v1 worker is gone after."""
    with WorkerProcess(env=V1_ONLY, log_path=worker_log_dir / "deploy-1.log", name="deploy-1"):
        run, _ = services.start_run(workflow=NAME, version=1, business_key="ORD-1001", input={"order_id": "ORD-1001"}, allow_older_version=True)
        wait_for(lambda: status_of(run.id) == RunStatus.WAITING_APPROVAL, what="the v1 run to wait for approval")
    return run, ApprovalRequest.objects.get(run=run, status="PENDING")


def steps_run(run: Run) -> list[str]:
    return list(run.checkpoints.order_by("seq").values_list("step", flat=True))


def test_with_v1_still_registered_the_paused_v1_run_finishes_on_v1(own_queue, sandbox, worker_log_dir):
    run, request = paused_v1_run(worker_log_dir)
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    with WorkerProcess(env=V1_AND_V2, log_path=worker_log_dir / "deploy-2-beside-1.log", name="deploy-2-beside-1"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the v1 run to finish")
    run.refresh_from_db()
    assert run.workflow_version == 1 and steps_run(run) == ["", "lookup", "approval", "payment"]  # no risk_check
    assert len(sandbox.state.list_refunds()) == 1
    new_run, _ = services.start_run(workflow=NAME, business_key="ORD-1003", input={"order_id": "ORD-1003"},
                                    enqueue=False)
    assert new_run.workflow_version == 2  # new runs start on the new deploy


def test_with_v1_retired_the_paused_run_is_blocked_until_an_operator_migrates_it(own_queue, sandbox, worker_log_dir):
    run, request = paused_v1_run(worker_log_dir)
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    with WorkerProcess(env=V2_ONLY, log_path=worker_log_dir / "deploy-2-only.log", name="deploy-2-only"):
        wait_for(lambda: status_of(run.id) == RunStatus.BLOCKED_VERSION, what="the v1 run to be blocked")
        run.refresh_from_db()
        assert "has no test-refund-deploy v1" in run.error["message"] and sandbox.state.list_refunds() == []
        operator = APIClient()
        operator.force_authenticate(make_user("migrator", "durable.view_run", "durable.migrate_run"))
        response = operator.post(f"/api/runs/{run.id}/migrate/", {"to_version": 2, "reason": "v1 is retired"})
        assert response.status_code == 200, response.data
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the migrated run to finish on v2")
    run.refresh_from_db()
    assert run.workflow_version == 2
    assert steps_run(run) == ["", "lookup", "migration v1->v2", "risk_check", "approval", "payment"]
    assert state_at(run.id, run.checkpoints.last().seq)["approval"]["request"] == str(request.id)  # the human's approval, revalidated
    assert len(sandbox.state.list_refunds()) == 1
    assert operator_actions().filter(run=run, action="migrate_version", reason="v1 is retired").exists()
    assert JournalEntry.objects.filter(run=run, name="migrate_version").exists()
