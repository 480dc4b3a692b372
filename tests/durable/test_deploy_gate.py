"""The deploy gate: `durable_versions --check` fails a deploy whose code would block unfinished runs."""
from __future__ import annotations

import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from durable import services
from durable.deploy_gate import blocked_runs
from durable.engine.states import RunStatus
from durable.models import Run
from durable.registry import registry
from durable.tools.processes import child_environment
from tests.durable import version_workflows as vw
from tests.durable.deploys.steps import NAME as DEPLOYED

pytestmark = pytest.mark.django_db


def start_v1() -> Run:
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="b", enqueue=False, allow_older_version=True)
    return run


@pytest.fixture
def deploy(monkeypatch):
    """What the new code registers for (name, version): replaced, or None for a version it dropped."""
    def swap(version: int, workflow):
        if workflow is None:
            monkeypatch.delitem(registry._by_key, (vw.NAME, version))
        else:
            monkeypatch.setitem(registry._by_key, (vw.NAME, version), workflow)
    return swap


def gate(*flags: str) -> str:
    out = StringIO()
    call_command("durable_versions", "--check", *flags, stdout=out)
    return out.getvalue()


def test_a_compatible_deploy_passes_the_gate():
    start_v1()  # v1 stays registered beside v2: its runs finish on v1
    assert "every unfinished run can resume" in gate()


def test_a_deploy_that_changes_a_version_in_place_fails_the_gate_naming_the_runs(deploy):
    run = start_v1()
    deploy(1, vw.build(1, ("a", "x", "b", "c")))
    with pytest.raises(CommandError) as refused:
        gate()
    assert refused.value.returncode == 1
    [blocked] = list(blocked_runs())
    assert (blocked.run_id, blocked.refusal.kind) == (str(run.id), "topology_changed")
    assert "step 'x' was inserted" in blocked.refusal.message
    assert blocked.migration == "v2 declares a migration from v1 that takes step 'a' to 'a'"
    run.refresh_from_db()
    assert (run.status, run.checkpoint_seq) == (RunStatus.PENDING, 0)  # the gate only reads


def test_a_dropped_version_fails_unless_a_registered_migration_covers_each_run(deploy):
    start_v1()
    deploy(1, None)
    with pytest.raises(CommandError):
        gate()
    [blocked] = list(blocked_runs())
    assert blocked.refusal.kind == "version_missing"
    assert blocked.migration == "v2 declares a migration from v1 that takes step 'a' to 'a'"
    assert "each covered by a registered migration" in gate("--allow-migratable")


def test_a_dropped_version_whose_positions_no_migration_maps_fails_even_when_migratable_is_allowed(deploy):
    run = start_v1()
    Run.objects.filter(id=run.id).update(current_step="c")  # v2's migration maps only 'a' and 'b'
    deploy(1, None)
    with pytest.raises(CommandError):
        gate("--allow-migratable")


def test_a_schema_bump_without_an_upcaster_fails_the_gate(deploy):
    start_v1()
    deploy(1, vw.build(1, checkpoint_schema_version=2))
    assert [b.refusal.kind for b in blocked_runs()] == ["schema_unreadable"]


def test_a_pinned_release_change_fails_the_gate_and_an_unpinned_one_does_not(deploy):
    start_v1()
    deploy(1, vw.build(1, prompt_release_override="prompts-2"))
    assert [b.refusal.kind for b in blocked_runs()] == []
    deploy(1, vw.build(1, pinned=("prompt_release",), prompt_release_override="prompts-2"))
    assert [b.refusal.kind for b in blocked_runs()] == ["release_changed"]


def test_finished_runs_do_not_count(deploy):
    run = start_v1()
    Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED)
    deploy(1, None)
    assert "every unfinished run can resume" in gate()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("installed,exit_code", [
    ("tests.durable.deploys.v1,tests.durable.deploys.v2", 0),  # deploy 2 keeps v1 registered
    ("tests.durable.deploys.v2", 1),                           # deploy 2 dropped v1: its run would block
])
def test_the_pipeline_step_as_documented_reads_the_code_installed_in_its_own_process(installed, exit_code):
    services.start_run(workflow=DEPLOYED, version=1, business_key="ORD-1", input={"order_id": "ORD-1"},
                       enqueue=False, allow_older_version=True)
    env = child_environment({"DURABLE_WORKFLOW_MODULES": installed})
    gate = subprocess.run([sys.executable, "manage.py", "durable_versions", "--check"], env=env,
                          cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)
    assert gate.returncode == exit_code, gate.stdout + gate.stderr
    if exit_code:
        assert f"{DEPLOYED} v1: 1 unfinished run(s) would be blocked" in gate.stdout
        assert "v2 declares a migration from v1 that takes step 'lookup' to 'lookup'" in gate.stdout


def test_a_workflow_module_that_no_longer_imports_is_named_by_the_system_check(monkeypatch):
    from durable.checks import check_workflow_imports
    from durable.registry import discover

    monkeypatch.setattr(registry, "import_failures", {})
    discover(["tests.durable.no_such_workflows"])
    [error] = check_workflow_imports(registry.import_failures)
    assert error.id == "durable.E012" and "tests.durable.no_such_workflows does not import" in error.msg
    assert "ModuleNotFoundError" in error.msg


def test_an_open_approval_whose_revalidation_no_longer_imports_is_named_by_the_system_check():
    from approvals.checks import check_revalidations
    from approvals.models import ApprovalRequest
    from durable.engine.approvals import ApprovalStatus

    run = start_v1()
    Run.objects.filter(id=run.id).update(status=RunStatus.WAITING_APPROVAL)
    fields = {"run": run, "kind": "refund", "business_key": "b", "snapshot": {}, "snapshot_hash": "h",
              "approval_object": {}, "object_hash": "o", "expires_at": "2999-01-01T00:00:00Z",
              "workflow_name": vw.NAME, "workflow_version": 1, "on_invalid": "fail", "on_expiry": "fail"}
    ApprovalRequest.objects.create(step="a", revalidate="durable.tools.demo.refund_checks:revalidate_refund", **fields)
    assert check_revalidations() == []
    ApprovalRequest.objects.create(step="b", revalidate="durable.tools.demo.refund_checks:moved_away", **fields)
    [error] = check_revalidations()
    assert error.id == "durable.E013" and "durable.tools.demo.refund_checks:moved_away" in error.msg
    ApprovalRequest.objects.filter(step="b").update(status=ApprovalStatus.EXPIRED)
    assert check_revalidations() == []
