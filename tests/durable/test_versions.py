"""The replay contract: no run resumes on a version, shape, schema or release it was not pinned to."""
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from durable import services, versions
from durable.checks import unregistered_versions_in_flight
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import Checkpoint, JournalEntry, Run
from durable.registry import registry
from durable.runtime import executor
from durable.workflow import Migration
from tests.audit import operator_actions
from tests.conftest import ALL_RUN_PERMS, make_user
from tests.durable import version_workflows as vw

pytestmark = pytest.mark.django_db


def start_v1() -> Run:
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="b", allow_older_version=True)
    return run


@pytest.fixture
def deploy(monkeypatch):
    """Replace what this worker has registered for (name, version), as a deploy would."""
    def swap(workflow):
        monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    return swap


def advance(run):
    executor.advance(run.id)
    run.refresh_from_db()
    return run


def test_a_run_finishes_on_the_version_it_started_with_while_that_version_is_registered():
    run = advance(start_v1())
    assert (run.status, run.workflow_version, run.output["done"]) == (RunStatus.SUCCEEDED, 1, ["a", "b", "c"])


@pytest.mark.parametrize("steps,side_effects,expected", [
    (("a", "x", "b", "c"), None, "step 'x' was inserted at position 2"),
    (("a", "c"), None, "step 'b' was removed"),
    (("a", "bb", "c"), None, "step 'b' was renamed to 'bb'"),
    (("b", "a", "c"), None, "steps were reordered"),
    (("a", "b", "c"), {"b": ("refund",)}, "step 'b' now performs side effect 'refund'"),
])
def test_a_changed_topology_blocks_the_run_saying_what_changed(deploy, steps, side_effects, expected):
    run = start_v1()
    deploy(vw.build(1, steps, side_effects=side_effects))
    run = advance(run)
    assert run.status == RunStatus.BLOCKED_VERSION
    assert run.error["kind"] == "topology_changed" and expected in run.error["message"]
    assert run.checkpoint_seq == 0  # not a single step ran on the changed code
    assert JournalEntry.objects.filter(run=run, kind="contract_blocked").count() == 1


def test_a_missing_version_blocks_instead_of_failing(monkeypatch):
    run = start_v1()
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "version_missing")


def test_a_schema_bump_without_an_upcaster_cannot_read_the_checkpoint(deploy):
    run = start_v1()
    deploy(vw.build(1, checkpoint_schema_version=2))
    run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "schema_unreadable")
    assert "needs an upcaster from v1 to v2" in run.error["message"]


def test_a_schema_bump_with_an_upcaster_reads_the_old_checkpoint(deploy):
    run = start_v1()
    deploy(vw.build(1, checkpoint_schema_version=2, upcasters={1: lambda s: {**s, "done": ["upcast"]}}))
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["done"] == ["upcast", "a", "b", "c"]
    assert set(run.checkpoints.filter(seq__gt=0).values_list("state_schema_version", flat=True)) == {2}



def test_an_upcaster_error_whose_text_cannot_be_stored_blocks_the_run_with_it_repaired(deploy):
    def broken(state):
        raise ValueError("cannot read \x00 \ud800")

    run = start_v1()
    deploy(vw.build(1, checkpoint_schema_version=2, upcasters={1: broken}))
    run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "schema_unreadable")
    assert run.error["message"].endswith("cannot read \ufffd \ufffd")

def test_a_pinned_prompt_release_change_blocks_the_run(deploy):
    run = start_v1()
    deploy(vw.build(1, pinned=("prompt_release",), prompt_release_override="prompts-2"))
    run = advance(run)
    assert (run.status, run.error["kind"]) == (RunStatus.BLOCKED_VERSION, "release_changed")
    assert "'prompts-1'" in run.error["message"] and "'prompts-2'" in run.error["message"]


def test_an_unpinned_release_change_does_not_block(deploy):
    run = start_v1()
    deploy(vw.build(1, prompt_release_override="prompts-2"))
    assert advance(run).status == RunStatus.SUCCEEDED


def blocked_v1_run(monkeypatch, position="b"):
    run = start_v1()
    Run.objects.filter(id=run.id).update(current_step=position)
    Checkpoint.objects.filter(run=run).update(next_step=position)
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    return advance(run)


def test_a_declared_migration_moves_a_blocked_run_to_the_new_version_audited(monkeypatch, operator):
    run = blocked_v1_run(monkeypatch, position="b")
    run = versions.migrate_run(run_id=run.id, to_version=2, user=operator, source="test", reason="v2 deployed")
    assert (run.status, run.workflow_version, run.current_step) == (RunStatus.PENDING, 2, "risk")
    assert run.topology_fingerprint == vw.v2.fingerprint
    migration = run.checkpoints.order_by("-seq").first()
    assert (migration.step, migration.next_step, migration.state["risk"]) == ("migration v1->v2", "risk", "unassessed")
    action = operator_actions().get(run=run, action="migrate_version")
    assert (action.actor, action.status_before, action.detail["after"]) == (
        operator, RunStatus.BLOCKED_VERSION, {"workflow_version": 2, "step": "risk"})
    assert JournalEntry.objects.filter(run=run, kind="operator", name="migrate_version").exists()
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["done"] == ["risk", "b", "c"]


def test_a_migration_is_refused_where_the_old_position_has_no_mapping(monkeypatch, operator):
    run = blocked_v1_run(monkeypatch, position="c")
    with pytest.raises(Conflict, match="maps no step for this run's position 'c'"):
        versions.migrate_run(run_id=run.id, to_version=2, user=operator, source="test")
    run.refresh_from_db()
    assert (run.status, run.workflow_version) == (RunStatus.BLOCKED_VERSION, 1)



def test_a_migrated_state_the_database_cannot_store_is_refused_and_nothing_moves(monkeypatch, operator, deploy):
    run = blocked_v1_run(monkeypatch, position="b")
    deploy(vw.build(2, ("a", "risk", "b", "c"), state=vw.StateV2, migrations=[
        Migration(from_version=1, step_map={"b": "risk"}, upcast=lambda s: {**s, "risk": "un\x00known"})]))
    with pytest.raises(Conflict, match="the migrated state cannot be stored: field risk must not contain NUL"):
        versions.migrate_run(run_id=run.id, to_version=2, user=operator, source="test")
    run.refresh_from_db()
    assert (run.status, run.workflow_version, run.checkpoints.count()) == (RunStatus.BLOCKED_VERSION, 1, 1)

def test_a_migration_needs_a_declared_migration_and_a_blocked_run(monkeypatch, operator, deploy):
    running = start_v1()
    run = blocked_v1_run(monkeypatch)
    deploy(vw.build(3, ("a", "b", "c")))
    with pytest.raises(Conflict, match="declares no migration from v1"):
        versions.migrate_run(run_id=run.id, to_version=3, user=operator, source="test")
    with pytest.raises(InvalidInput):
        versions.migrate_run(run_id=run.id, to_version=9, user=operator, source="test")
    with pytest.raises(Conflict, match="only runs blocked on their version"):
        versions.migrate_run(run_id=running.id, to_version=2, user=operator, source="test")


def test_migrate_blocked_runs_migrates_what_it_can_and_says_why_not_the_rest(monkeypatch, operator):
    movable, stuck = start_v1(), start_v1()
    Run.objects.filter(id=stuck.id).update(current_step="c")
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    advance(movable), advance(stuck)
    migrated, refused = versions.migrate_blocked_runs(workflow=vw.NAME, from_version=1, to_version=2,
                                                      user=operator, source="test")
    assert [r.id for r in migrated] == [movable.id] and list(refused) == [str(stuck.id)]


def test_the_migrate_api_needs_its_permission_and_answers_409_on_refusal(monkeypatch):
    run = blocked_v1_run(monkeypatch, position="c")
    client = APIClient()
    client.force_authenticate(make_user("viewer", "durable.view_run"))
    assert client.post(f"/api/runs/{run.id}/migrate/", {"to_version": 2}, format="json").status_code == 403
    client.force_authenticate(make_user("migrator", *ALL_RUN_PERMS, "durable.migrate_run"))
    refused = client.post(f"/api/runs/{run.id}/migrate/", {"to_version": 2}, format="json")
    assert refused.status_code == 409 and refused.data["current_status"] == RunStatus.BLOCKED_VERSION
    assert client.post(f"/api/runs/{run.id}/migrate/", {}, format="json").data.keys() == {"to_version"}
    Run.objects.filter(id=run.id).update(current_step="b")
    moved = client.post(f"/api/runs/{run.id}/migrate/", {"to_version": 2, "reason": "v2 out"}, format="json")
    assert moved.status_code == 200 and moved.data["workflow_version"] == 2
    bulk = client.post("/api/runs/migrate-blocked/", {"workflow": vw.NAME, "from_version": 1, "to_version": 2},
                       format="json")
    assert bulk.status_code == 200 and bulk.data == {"migrated": [], "refused": {}}


def test_durable_versions_reports_in_flight_retirable_and_blocked(monkeypatch):
    run = blocked_v1_run(monkeypatch)
    out = StringIO()
    call_command("durable_versions", stdout=out)
    report = out.getvalue()
    assert f"{vw.NAME:<24}       1 NO" in report and "are in flight but no worker has this version" in report
    assert f"blocked {run.id}: this worker has no {vw.NAME} v1" in report
    assert f"{vw.NAME:<24}       2 yes" in report


def test_the_system_check_warns_when_a_version_with_runs_in_flight_is_not_registered(monkeypatch):
    start_v1()
    assert unregistered_versions_in_flight(databases=["default"]) == []
    monkeypatch.delitem(registry._by_key, (vw.NAME, 1))
    assert unregistered_versions_in_flight() == []  # reads the database only when `check` names one
    warnings = unregistered_versions_in_flight(databases=["default"])
    assert [w.id for w in warnings] == ["durable.W001"] and f"{vw.NAME} v1" in warnings[0].msg


def test_no_run_moves_to_another_version_without_a_migration(deploy):
    run = start_v1()
    deploy(vw.build(1, ("a", "x", "b", "c")))
    for _ in range(3):  # retried, resumed: still blocked, still v1
        advance(run)
        services.resume_run(run_id=run.id, user=None, source="test")
    run = advance(run)
    assert (run.status, run.workflow_version, run.checkpoint_seq) == (RunStatus.BLOCKED_VERSION, 1, 0)
