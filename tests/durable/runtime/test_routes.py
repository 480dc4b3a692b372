"""Routes decided at run time (durable/engine/graph.py in the executor): loops, branches, refusals, the budget,
and the graph in the replay contract."""
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from durable import services, versions
from durable.console.timeline import run_timeline
from durable.deploy_gate import blocked_runs
from durable.engine.states import RunStatus
from durable.models import Run
from durable.registry import registry
from tests.durable import graph_workflows as gw
from tests.durable.claims import advance
from tests.durable.metered import counting

pytestmark = pytest.mark.django_db


def start(workflow: str, version: int | None = None, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, version=version, input=given, business_key="k",
                                allow_older_version=version is not None)
    return run


def routes_taken(run: Run) -> list[tuple[str, str]]:
    return list(run.checkpoints.order_by("seq").values_list("step", "next_step"))[1:]


def test_a_step_routing_to_itself_loops_n_times_then_finishes_with_a_checkpoint_per_visit():
    run = advance(start(gw.LOOP, limit=5))
    assert run.status == RunStatus.SUCCEEDED and run.output["answer"] == "thought 6 times"
    assert routes_taken(run) == [("think", "think")] * 5 + [("think", "answer"), ("answer", "")]
    assert run.checkpoint_seq == 5 + 2  # 5 loops, the visit that leaves, and the answer
    summaries = [e.summary for e in run_timeline(run) if e.kind == "checkpoint"]
    assert summaries[1] == "checkpoint #1: think done → think (route think -> think)"
    assert summaries[6] == "checkpoint #6: think done → answer (route think -> answer)"
    assert summaries[7] == "checkpoint #7: answer done → end"  # the implicit route is not called one


def test_a_loop_resumes_where_its_newest_checkpoint_is_across_time_slices(settings):
    settings.DURABLE_TIME_SLICE_SECONDS = 0  # every task runs one visit and gives the run back
    run = start(gw.LOOP, limit=2)
    for _ in range(3):
        assert advance(run).status == RunStatus.PENDING
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["visited"] == ["think", "think", "think", "answer"]


@pytest.mark.parametrize("kind,visited", [("refund", ["triage", "refund"]), ("question", ["triage", "reply"])])
def test_a_branch_is_chosen_by_the_state(kind, visited):
    run = advance(start("test-branch", kind=kind))
    assert run.status == RunStatus.SUCCEEDED and run.output["visited"] == visited
    assert routes_taken(run)[0] == ("triage", visited[1])


def test_an_undeclared_route_fails_the_run_for_good_naming_step_route_and_declared_ones():
    with counting("non_retryable_failure_total", workflow="test-misrouted", version="1") as failed:
        run = advance(start("test-misrouted", mode="undeclared"))
    assert (run.status, run.error["kind"], run.error["retryable"], run.attempt) == (
        RunStatus.FAILED, "undeclared_route", False, 1)
    assert ("step 'plan' chose the route 'plan', which it does not declare: it declares 'act', 'answer'"
            in run.error["message"])
    assert run.checkpoint_seq == 0 and failed.by == 1  # nothing checkpointed past the refusal, never retried


def test_a_plain_state_from_a_step_with_several_routes_fails_saying_to_choose():
    run = advance(start("test-misrouted", mode="plain"))
    assert (run.status, run.error["kind"]) == (RunStatus.FAILED, "route_not_chosen")
    assert "step 'plan' declares the routes 'act', 'answer' and returned a plain state" in run.error["message"]


@pytest.mark.parametrize("slice_seconds", [20.0, 0.0], ids=["one task", "a task per visit"])
def test_the_step_budget_ends_an_endless_loop_failed_with_the_count_and_the_last_route(settings, slice_seconds):
    settings.DURABLE_TIME_SLICE_SECONDS = slice_seconds
    run = start("test-endless")
    with counting("step_budget_exhausted_total", workflow="test-endless", version="1") as exhausted:
        for _ in range(10):
            run = advance(run)
            if run.status != RunStatus.PENDING:
                break
    assert run.status == RunStatus.FAILED and exhausted.by == 1
    assert run.checkpoint_seq == 5 and run.output is None  # max_visits=5 visits, not one more
    assert {k: run.error[k] for k in ("kind", "retryable", "visits", "max_visits", "last_route")} == {
        "kind": "step_budget_exhausted", "retryable": False, "visits": 5, "max_visits": 5, "last_route": "spin -> spin"}
    assert "step budget of 5 step visits" in run.error["message"]
    [failure] = [e for e in run_timeline(run) if e.kind == "failure"]
    assert failure.summary.startswith("stopped by the step budget after 5 visits: step_budget_exhausted")


def test_the_default_budget_comes_from_the_setting(settings):
    settings.DURABLE_MAX_STEP_VISITS = 3
    run = advance(start(gw.LOOP, limit=5))
    assert (run.status, run.error["visits"], run.error["last_route"]) == (
        RunStatus.FAILED, 3, "think -> think")


# The graph is part of the replay contract.

@pytest.fixture
def deploy(monkeypatch):
    def swap(workflow):
        monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    return swap


def test_existing_workflows_keep_their_fingerprints():
    # Computed on main before routes existed: a workflow that declares none is pinned as before.
    from tests.durable import version_workflows, workflows  # noqa: F401 (registers them)
    pinned = {("claims-agent", 1): "626dc5738851f4f81db31fd8efb9ac05", ("claims-agent", 2): "77045195120ed613fab341403c1597bd",
              ("test-counting", 1): "c80aafedfa4deef3e78b867474d749b1", ("test-versioned", 1): "d4d507bf4c0f14b95e563b768e0b18cb",
              ("test-versioned", 2): "52f3e71be14d567b9b2e89ebcf22218a", ("test-customer-order", 1): "7a9aaef99903736415e925ab2cc0cb60",
              ("test-slow-call", 1): "ab2bf9dda8de65c259f8f62a535c1fb8", ("test-unstorable", 1): "ec666e8d51867e685714de183e077afd"}
    assert {key: registry.get(*key).fingerprint for key in pinned} == pinned
    from durable.tools.bench.workflows import bench_workflow
    assert (bench_workflow(10).fingerprint, bench_workflow(3, side_effect=True).fingerprint) == (
        "5afe0aa2d5011a537e8d413f6950935b", "b6311e3529f4beabadc6268280f70434")


def test_a_run_pinned_to_one_graph_is_blocked_on_code_whose_routes_differ_and_a_migration_moves_it(deploy, operator):
    run = start(gw.LOOP, version=1, limit=1)
    deploy(gw.build_loop(1, ("answer",)))  # v1 changed in place: `think` no longer loops
    run = advance(run)
    assert (run.status, run.error["kind"], run.checkpoint_seq) == (RunStatus.BLOCKED_VERSION, "topology_changed", 0)
    assert "step 'think' no longer routes to 'think'" in run.error["message"]
    run = versions.migrate_run(run_id=run.id, to_version=2, user=operator, source="test", reason="v2 deployed")
    assert (run.status, run.workflow_version, run.current_step) == (RunStatus.PENDING, 2, "think")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["visited"] == ["think", "think", "answer"]


def test_the_deploy_gate_names_a_route_change_and_the_migration_that_covers_it(deploy):
    run = start(gw.LOOP, version=1)
    deploy(gw.build_loop(1))  # the same graph built again: it passes
    out = StringIO()
    call_command("durable_versions", "--check", stdout=out)
    assert "every unfinished run can resume" in out.getvalue()
    deploy(gw.build_loop(1, ("answer",)))
    with pytest.raises(CommandError):
        call_command("durable_versions", "--check", stdout=StringIO())
    [blocked] = [b for b in blocked_runs() if b.run_id == str(run.id)]
    assert "no longer routes to 'think'" in blocked.refusal.message
    assert blocked.migration == "v2 declares a migration from v1 that takes step 'think' to 'think'"


def test_a_route_naming_no_step_is_refused_at_registration():
    from durable.registry import WorkflowRegistry
    wrong = gw.build_loop(7, ("think", "ansver"))
    with pytest.raises(ValueError, match=r"test-loop v7: step 'think' routes to 'ansver', which is not a step"):
        WorkflowRegistry().register(wrong)


def test_a_workflow_registered_before_its_steps_is_checked_once_its_module_is_imported(tmp_path, monkeypatch):
    from durable.registry import discover
    module = tmp_path / "graph_wrong_module.py"
    module.write_text("from pydantic import BaseModel\nfrom durable import Workflow, register\n"
                      "class S(BaseModel):\n    n: int = 0\n"
                      "wf = register(Workflow(name='test-wrong-graph', version=1, state=S, input=S))\n"
                      "@wf.step(next=['nowhere'])\ndef a(ctx, state):\n    return state\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "import_failures", {})
    monkeypatch.setattr(registry, "_by_key", dict(registry._by_key))
    discover(["graph_wrong_module"])
    assert "'nowhere', which is not a step" in registry.import_failures["graph_wrong_module"]
    assert "test-wrong-graph" not in registry.names()  # its runs are blocked, never run on a broken graph


def test_a_migration_mapping_to_no_step_is_refused_at_registration():
    from durable.registry import WorkflowRegistry
    from durable.workflow import Migration
    wrong = gw.build_loop(8, migrations=[Migration(from_version=1, step_map={"think": "ponder"})])
    with pytest.raises(ValueError, match="maps to 'ponder', not a step of this version"):
        WorkflowRegistry().register(wrong)


def test_no_run_starts_on_a_graph_whose_routes_name_no_step(monkeypatch):
    wrong = gw.build_loop(9)
    wrong.step(lambda ctx, state: state, name="stray", next=["nowhere"])  # declared after registration
    monkeypatch.setitem(registry._by_key, (wrong.name, 9), wrong)
    with pytest.raises(ValueError, match="'nowhere', which is not a step"):
        start(gw.LOOP, version=9)
    assert not Run.objects.filter(workflow_version=9).exists()
