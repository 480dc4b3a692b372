"""The fault drill: its verdicts on made-up counts, and a tiny real drill through crashing workers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from approvals.models import ApprovalRequest
from durable import services
from durable.engine.ledger import Capabilities
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import DrillRecord, JournalEntry, OperatorAction, Run, SideEffect
from durable.registry import registry
from durable.tools import drill
from durable.tools.drill import Cell, CellResult, DrillConfig, DrillResult, format_matrix, run_drill
from durable.tools.drill_counts import CellCounts, Expectation, expectation, judge
from durable.tools.faults import AFTER_COMMIT, AFTER_DOWNSTREAM, AFTER_PREPARE, AFTER_STARTED, FAULT_POINTS
from tests.approvals.flow import waiting_claim
from tests.durable.metered import counting

KEYS = Capabilities(honours_idempotency_keys=True)
LOOKUP = Capabilities(can_lookup=True)
BLIND = Capabilities()
CLEAN = CellCounts(runs=5, crashes=5, crashed_runs=5, completed=5, needs_attention=0, lost=0, unknown=0,
                   unknown_settleable=0, ended_unknown=0, unsettled=0, max_effects=1, duplicates=0, wrong_effects=0)
ALL_UNKNOWN = replace(CLEAN, completed=0, needs_attention=5, unknown=5, ended_unknown=5)


@pytest.mark.parametrize("point", FAULT_POINTS)
@pytest.mark.parametrize("capabilities", [KEYS, LOOKUP])
def test_a_downstream_with_keys_or_lookup_settles_every_crash(point, capabilities):
    assert expectation(point, capabilities) == Expectation(ends_unknown=False, armed_effects=1)


def test_a_blind_downstream_is_unknown_only_once_the_operation_is_started():
    assert expectation(AFTER_PREPARE, BLIND) == Expectation(ends_unknown=False, armed_effects=1)
    assert expectation(AFTER_STARTED, BLIND) == Expectation(ends_unknown=True, armed_effects=0)  # never sent
    assert expectation(AFTER_DOWNSTREAM, BLIND) == Expectation(ends_unknown=True, armed_effects=1)
    assert expectation(AFTER_COMMIT, BLIND) == Expectation(ends_unknown=False, armed_effects=1)


def test_clean_cells_pass():
    assert judge(CLEAN, expectation(AFTER_DOWNSTREAM, KEYS)) == []
    assert judge(ALL_UNKNOWN, expectation(AFTER_DOWNSTREAM, BLIND)) == []


@pytest.mark.parametrize("counts, capabilities, reason", [
    (replace(CLEAN, duplicates=1, max_effects=2), KEYS, "1 operation(s) took effect twice"),
    (replace(CLEAN, completed=4, lost=1), LOOKUP, "1 run(s) lost"),
    (replace(CLEAN, completed=4, needs_attention=1, unknown=1, unknown_settleable=1, ended_unknown=1), LOOKUP,
     "1 UNKNOWN operation(s) where the downstream can tell"),
    (replace(ALL_UNKNOWN, completed=1, needs_attention=4, unknown=4, ended_unknown=4), BLIND,
     "1 run(s) ended other than UNKNOWN"),
    (replace(CLEAN, unsettled=1), KEYS, "1 crashed operation(s) not SUCCEEDED, though nothing was in doubt"),
    (replace(CLEAN, wrong_effects=1), KEYS, "1 operation(s) with the wrong number of effects"),
    (replace(CLEAN, crashes=4, crashed_runs=4), KEYS, "the fault fired in only 4 of 5 run(s)"),
    (replace(CLEAN, forks=5, forks_settled=5, fork_effects=1), KEYS,
     "forks of completed runs took 1 effect(s) their family had taken"),
    (replace(CLEAN, forks=5, forks_settled=4), KEYS, "1 of 5 fork(s) of completed runs lost"),
    (replace(CLEAN, completed=4, blocked=1), KEYS, "1 run(s) BLOCKED_VERSION: the drill's workers do not run the "
                                                   "drilled version (is its module in DURABLE_WORKFLOW_MODULES?)"),
])
def test_each_broken_promise_is_a_violation(counts, capabilities, reason):
    assert reason in judge(counts, expectation(AFTER_DOWNSTREAM, capabilities))


def test_the_matrix_is_a_fixed_width_table():
    cells = (
        CellResult(Cell(AFTER_PREPARE, "refund"), "payments", CLEAN, (), (), 1.0),
        CellResult(Cell(AFTER_DOWNSTREAM, "notify"), "notifications", replace(ALL_UNKNOWN, duplicates=2),
                   ("2 operation(s) took effect twice",), (), 1.0),
    )
    lines = format_matrix(DrillResult(DrillConfig(), cells, 12.34)).splitlines()
    verdict_at = lines[0].index("verdict")
    assert [line[verdict_at:] for line in lines[2:4]] == ["ok", "VIOLATION: 2 operation(s) took effect twice"]
    assert lines[3].startswith("after_downstream  notify (notifications)")
    assert ("totals: 10 runs, 10 crash(es) injected, 0 approval(s) decided by the drill's account, "
            "2 duplicate effect(s), 0 lost, 1 cell(s) in violation") in lines
    assert lines[-1] == "elapsed: 12.3 s"


def test_the_command_refuses_a_fault_point_that_does_not_exist():
    with pytest.raises(CommandError, match="--points must name fault points"):
        call_command("durable_drill", "--points", "after_lunch")


@pytest.mark.django_db
def test_the_command_prints_the_matrix_and_fails_on_a_violation(monkeypatch):
    twice = CellResult(Cell(AFTER_DOWNSTREAM, "notify"), "notifications", replace(ALL_UNKNOWN, duplicates=1),
                       ("1 operation(s) took effect twice",), (), 1.0)
    monkeypatch.setattr(drill, "run_drill", lambda config, on_cell: DrillResult(config, (twice,), 1.0))
    out = StringIO()
    with pytest.raises(CommandError, match="the drill found violations"):
        call_command("durable_drill", "--runs-per-cell", "1", stdout=out)
    assert "VIOLATION: 1 operation(s) took effect twice" in out.getvalue()


def ci_drills(config: DrillConfig) -> list[DrillConfig]:
    """Every cell, two runs each, on a server broker. On kombu's filesystem broker a dead pool
    child costs Celery 10 s (worker_lost_wait), so there a representative subset runs: the two
    crashes nothing can settle, and the classic window on a downstream with keys and with lookup."""
    if not settings.CELERY_BROKER_URL.startswith("filesystem"):
        return [replace(config, runs_per_cell=2)]
    return [replace(config, points=(AFTER_STARTED, AFTER_DOWNSTREAM), actions=("notify",)),
            replace(config, points=(AFTER_DOWNSTREAM,), actions=("refund", "ticket"))]


def approved_by_the_drill(run_ids) -> set[str]:
    """Who approved these runs' requests, each request APPROVED by one account, audited under its name."""
    requests = ApprovalRequest.objects.filter(run_id__in=run_ids)
    assert {r.status for r in requests} == {"APPROVED"} and requests.count() == len(run_ids)
    audited = OperatorAction.objects.filter(run_id__in=run_ids, action="approve")
    assert sorted(audited.values_list("run_id", flat=True)) == sorted(run_ids)
    assert set(audited.values_list("source", flat=True)) == {"command"}
    assert set(audited.values_list("actor_username", flat=True)) == {r.decided_by.username for r in requests}
    return {r.decided_by.username for r in requests}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_small_drill_approves_its_runs_crashes_every_cell_and_nothing_takes_effect_twice(worker_log_dir):
    """claims-agent v2, which waits for a human before paying: the drill approves as its own approver account."""
    small = DrillConfig(runs_per_cell=1, workers=2, timeout=90, log_dir=worker_log_dir)
    with counting("side_effect_unknown_total", action="notify") as unknown_notifications, \
            counting("reconciliation_total", action="refund", outcome="retry_same_key") as refunds_resent, \
            counting("reconciliation_total", action="ticket", outcome="found") as tickets_found:
        results = [run_drill(config) for config in ci_drills(small)]
    cells = {(cell.cell.point, cell.cell.action): cell for result in results for cell in result.cells}
    # The counters, added up over the drill's worker processes, say what the matrix says.
    runs_at = lambda action, *points: sum(c.counts.runs for (p, a), c in cells.items() if a == action and p in points)
    assert unknown_notifications.by == sum(c.counts.ended_unknown for (_, a), c in cells.items() if a == "notify")
    assert refunds_resent.by == runs_at("refund", AFTER_STARTED, AFTER_DOWNSTREAM)
    assert tickets_found.by == runs_at("ticket", AFTER_DOWNSTREAM)
    assert all(cell.ok for cell in cells.values()), "\n".join(format_matrix(r) for r in results)
    assert all(cell.counts.crashes == cell.counts.runs >= 1 for cell in cells.values())
    assert all((cell.counts.duplicates, cell.counts.lost) == (0, 0) for cell in cells.values())
    # Each run that completed was forked from the checkpoint before its refund: every fork settled, taking nothing.
    assert all(c.counts.forks == c.counts.forks_settled == c.counts.completed and c.counts.fork_effects == 0
               for c in cells.values()) and sum(c.counts.forks for c in cells.values()) > 0
    for point, effects in ((AFTER_STARTED, 0), (AFTER_DOWNSTREAM, 1)):
        unknown = cells[(point, "notify")].counts
        assert unknown.needs_attention == unknown.ended_unknown == unknown.runs
        assert unknown.max_effects == effects
    for action, downstream in (("refund", "payments"), ("ticket", "tickets")):
        counts = cells[(AFTER_DOWNSTREAM, action)].counts
        assert cells[(AFTER_DOWNSTREAM, action)].downstream == downstream
        assert (counts.completed, counts.unknown, counts.max_effects) == (counts.runs, 0, 1)
    # Every run asked a human before paying, and the drill's approver account answered through the approvals
    # app's decision: one account per drill, never the one that started the runs, retired afterwards.
    run_ids = [run_id for cell in cells.values() for run_id in cell.run_ids]
    assert {run.workflow_version for run in Run.objects.filter(id__in=run_ids)} == {2}
    approvers = approved_by_the_drill(run_ids)
    assert len(approvers) == len(results) and all(name.startswith("durable-tool-drill-approver-") for name in approvers)
    assert not User.objects.filter(username__in=approvers, is_active=True).exists()
    starters = set(Run.objects.filter(id__in=run_ids).values_list("created_by__username", flat=True))
    assert not starters & approvers and sum(result.approvals_decided for result in results) == len(run_ids)


def support_drills(config: DrillConfig) -> list[DrillConfig]:
    """Every cell on a server broker; on the filesystem broker (see ci_drills) the email's three cells with a
    parallel call in flight or in doubt, and the refund's classic window."""
    if not settings.CELERY_BROKER_URL.startswith("filesystem"):
        return [config]
    return [replace(config, points=(AFTER_STARTED, AFTER_DOWNSTREAM, AFTER_COMMIT), actions=("email",)),
            replace(config, points=(AFTER_DOWNSTREAM,), actions=("refund",))]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workflow, step", [("support-agent", "act"), ("support-agent-pydantic-ai", "converse"),
                                            ("support-agent-openai-agents", "converse")])
def test_the_support_agent_is_drilled_at_every_fault_point_with_its_emails_in_flight_together(
        worker_log_dir, workflow, step, request):
    """A tool-calling loop, written by hand, with Pydantic AI or with the OpenAI Agents SDK (its twins): the lookups
    and the two emails of one turn go through ctx.parallel, the refund waits for the drill's approval inside the loop; every fault
    point of the refund and the emails, 0 duplicates, 0 lost."""
    if workflow == "support-agent-pydantic-ai":
        request.getfixturevalue("agent_workers")  # its workers load the workflows that run Pydantic AI agents
    elif workflow == "support-agent-openai-agents":
        request.getfixturevalue("openai_agent_workers")  # its workers load the OpenAI Agents SDK twin
    # The OpenAI Agents SDK takes seconds of CPU to import in each worker a cell starts: its twin has one worker
    # (the emails' parallel group runs in one worker either way).
    workers = 1 if workflow == "support-agent-openai-agents" else 2
    config = DrillConfig(workflow=workflow, runs_per_cell=1, workers=workers, timeout=120, log_dir=worker_log_dir)
    results = [run_drill(drilled) for drilled in support_drills(config)]
    cells = {cell.cell.label: cell for result in results for cell in result.cells}
    assert all(cell.ok for cell in cells.values()), "\n".join(format_matrix(r) for r in results)
    assert sum(result.total("duplicates") + result.total("lost") for result in results) == 0
    if not settings.CELERY_BROKER_URL.startswith("filesystem"):
        assert set(cells) == {f"{point}-{action}" for point in FAULT_POINTS for action in ("email", "refund")}
    run_ids = [run_id for cell in cells.values() for run_id in cell.run_ids]
    approved_by_the_drill(run_ids)
    # The turn's two emails went out as one parallel group of two side effects, in every run.
    groups = [group for group in JournalEntry.objects.filter(run_id__in=run_ids, kind=JournalEntry.Kind.PARALLEL,
                                                             step=step).order_by("created_at", "id")
              if [call.get("action") for call in group.detail["calls"]] == ["email"] * 2]
    assert {group.run_id for group in groups} == set(run_ids)

    def emails(label: str) -> list[str]:
        """The statuses of the run's two emails, in the order the group gave them."""
        [run_id] = cells[label].run_ids
        group = next(g for g in groups if g.run_id == run_id)  # its first: both emails sent from it
        return [SideEffect.objects.get(pk=call["operation_id"]).status for call in group.detail["calls"]]

    # Crashed once committed, the other email was still in flight: on a downstream that cannot be looked up
    # it is in doubt, UNKNOWN, and the run waits for an operator; nothing was sent twice.
    assert sorted(emails("after_commit-email")) == ["SUCCEEDED", "UNKNOWN"]  # whichever answered first crashed
    assert cells["after_commit-email"].counts.needs_attention == 1
    # Crashed as the first was started: nothing had been sent, the second was never started.
    assert emails("after_started-email") == ["UNKNOWN", "PENDING"]
    if "after_prepare-email" in cells:  # each email crashes once at its own Prepare, then both go out
        assert cells["after_prepare-email"].counts.crashes == 2 and emails("after_prepare-email") == ["SUCCEEDED"] * 2


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_drill_whose_workers_lack_the_workflow_says_so_rather_than_waiting_out_its_timeout(worker_log_dir):
    """The twin's module is not in the workers' DURABLE_WORKFLOW_MODULES here (no agent_workers): its runs are
    BLOCKED_VERSION at once, and the cell ends with that as its verdict."""
    config = DrillConfig(workflow="support-agent-pydantic-ai", runs_per_cell=1, workers=1, timeout=120,
                         points=(AFTER_PREPARE,), actions=("email",), log_dir=worker_log_dir)
    [cell] = run_drill(config).cells
    assert not cell.ok and cell.counts.blocked == 1 and cell.counts.lost == 0
    assert any("BLOCKED_VERSION" in violation for violation in cell.violations)
    assert cell.seconds < config.timeout


@pytest.mark.django_db
def test_a_drill_records_the_workflow_version_it_ran_against(monkeypatch):
    verdicts = {AFTER_PREPARE: (), AFTER_COMMIT: ("1 run(s) lost",)}
    monkeypatch.setattr(drill, "run_cell", lambda config, cell, number, account, approver: CellResult(
        cell, "payments", CLEAN, verdicts[cell.point], (), 0.1))
    run_drill(DrillConfig(version=1, points=(AFTER_PREPARE,), actions=("refund", "ticket")))
    run_drill(DrillConfig(version=1, points=(AFTER_PREPARE, AFTER_COMMIT), actions=("refund",)))
    run_drill(DrillConfig(points=(AFTER_PREPARE,)))  # the newest version, every side effect it declares
    newest, failed, passed = DrillRecord.objects.all()  # newest first
    v1, v2 = registry.get("claims-agent", 1), registry.get("claims-agent", 2)
    assert (passed.workflow_name, passed.workflow_version, passed.topology_fingerprint) == ("claims-agent", 1,
                                                                                          v1.fingerprint)
    assert (passed.passed, passed.runs, passed.points, passed.actions) == (True, 10, ["after_prepare"],
                                                                          ["refund", "ticket"])
    assert passed.started_at <= passed.finished_at and passed.database and passed.broker
    assert (failed.passed, failed.violations) == (False, ["after_commit-refund: 1 run(s) lost"])
    assert (newest.workflow_version, newest.topology_fingerprint, newest.actions) == (
        2, v2.fingerprint, ["notify", "refund", "ticket"])


def test_the_drill_takes_a_version_that_waits_for_a_human_and_every_side_effect_it_declares():
    drill.validate(DrillConfig(version=2))  # it approves: nothing to refuse
    assert drill.drilled_actions(DrillConfig(workflow="support-agent")) == ("email", "refund")
    assert [cell.label for cell in DrillConfig(workflow="support-agent", points=(AFTER_COMMIT,)).cells()] == [
        "after_commit-email", "after_commit-refund"]


@pytest.mark.parametrize("config, refusal", [
    (DrillConfig(workflow="support-agent", actions=("notify",)), r"--actions must be side effects support-agent "
                                                                 r"declares \(email, refund\); got \['notify'\]"),
    (DrillConfig(workflow="nobody"), "--workflow: "),
    (DrillConfig(target="durable.tools.nowhere.Target"), "--target: "),
])
def test_a_drill_that_cannot_mean_anything_is_refused_naming_the_option(config, refusal):
    with pytest.raises(ValueError, match=refusal):
        drill.validate(config)


FOREIGN_FIELDS = ("status", "lease_owner", "lease_expires_at", "fencing_token", "enqueued_at", "updated_at",
                  "checkpoint_seq", "current_step")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_drill_beside_a_production_run_leaves_that_run_alone(worker_log_dir, sandbox):
    """A production run whose worker died (lease expired, a ticket left STARTED an hour ago) is due for any
    sweeper; the drill's sweeper, its reconciler and its workers must not touch it. Another waits for a
    person's approval: the drill's approver, deciding its own runs' approvals meanwhile, leaves it pending."""
    person = User.objects.create_user("production-caller")
    waiting, request = waiting_claim("ORD-1003", starter=person)
    foreign, _ = services.start_run(workflow="claims-agent", version=1, business_key="ORD-4242", user=person,
                                    enqueue=False, allow_older_version=True,
                                    input={"order_id": "ORD-4242", "customer_message": "ORD-4242 broke, refund"})
    long_ago = timezone.now() - timedelta(hours=1)
    Run.objects.filter(id=foreign.id).update(status=RunStatus.RUNNING, lease_owner="dead-production-worker",
                                             lease_expires_at=long_ago, enqueued_at=long_ago, fencing_token=3)
    SideEffect.objects.create(operation_id="f" * 32, run_id=foreign.id, step="ticket", action_name="ticket",
                              downstream="tickets", business_key="ORD-4242", request_hash="h", status=Op.STARTED)
    SideEffect.objects.filter(pk="f" * 32).update(updated_at=long_ago)
    before = Run.objects.values(*FOREIGN_FIELDS).get(id=foreign.id)

    result = run_drill(DrillConfig(runs_per_cell=1, workers=1, points=(AFTER_DOWNSTREAM,), actions=("refund",),
                                   timeout=90, log_dir=worker_log_dir))

    assert result.ok, format_matrix(result)
    assert result.approvals_decided == 1  # its own run's, on claims-agent v2
    assert ApprovalRequest.objects.get(id=request.id).status == "PENDING" and not request.decisions.exists()
    assert Run.objects.get(id=waiting.id).status == RunStatus.WAITING_APPROVAL
    assert Run.objects.values(*FOREIGN_FIELDS).get(id=foreign.id) == before  # not re-sent, not claimed
    assert not JournalEntry.objects.filter(run_id=foreign.id).exists()  # no step, activity or reconciliation
    ticket = SideEffect.objects.get(pk="f" * 32)
    assert (ticket.status, ticket.updated_at) == (Op.STARTED, long_ago)  # not looked up in the drill's sandbox
    drilled = Run.objects.get(id=result.cells[0].run_ids[0])
    assert drilled.created_by.username.startswith("durable-tool-drill-") and not drilled.created_by.is_active



SETTINGS_SEEN = """
import json, django
django.setup()
from django.conf import settings
from durable.conf import durable_settings
print(json.dumps({"tools": "durable.tools" in settings.INSTALLED_APPS, "scope": durable_settings.DURABLE_SCOPE_CREATED_BY,
                  "queue": [durable_settings.DURABLE_QUEUE, settings.CELERY_TASK_DEFAULT_QUEUE],
                  "lease": durable_settings.DURABLE_LEASE_SECONDS, "sweeps": durable_settings.DURABLE_WORKER_SWEEPS,
                  "database": str(settings.DATABASES["default"]["NAME"]), "stand_ins": settings.DURABLE_SANDBOX_URL}))
"""


@pytest.mark.django_db
def test_the_drill_s_workers_load_the_project_s_settings_with_the_drill_s_on_top(tmp_path):
    """What a worker the drill starts reads, whatever the project's own settings read from the environment."""
    from django.db import connection

    env = drill.worker_env(Cell(AFTER_COMMIT, "refund"), tmp_path, {
        "DURABLE_SCOPE_CREATED_BY": 7, "DURABLE_QUEUE": "durable-drill-x", "CELERY_TASK_DEFAULT_QUEUE": "durable-drill-x",
        "DURABLE_SANDBOX_URL": "http://127.0.0.1:9"})
    assert (env["DJANGO_SETTINGS_MODULE"], env["DURABLE_DRILL_SETTINGS"]) == ("durable.tools.drill_settings",
                                                                            "durable.project.settings")
    assert (env["DURABLE_FAULT_POINTS"], env["DURABLE_FAULT_ACTIONS"]) == (AFTER_COMMIT, "refund")
    child = {**os.environ, **env, "DURABLE_LEASE_SECONDS": "30", "DURABLE_SCOPE_CREATED_BY": ""}
    seen = subprocess.run([sys.executable, "-c", SETTINGS_SEEN], env=child, cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=60)
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert json.loads(seen.stdout.splitlines()[-1]) == {
        "tools": True, "scope": 7, "queue": ["durable-drill-x", "durable-drill-x"], "lease": 2.0, "sweeps": True,
        "database": str(connection.settings_dict["NAME"]), "stand_ins": "http://127.0.0.1:9"}


def test_the_drill_settings_name_what_they_need_when_the_project_s_are_not_given():
    child = {**os.environ, "DJANGO_SETTINGS_MODULE": "durable.tools.drill_settings", "DURABLE_DRILL_SETTINGS": ""}
    seen = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=child, cwd=settings.BASE_DIR,
                          capture_output=True, text=True, timeout=60)
    assert seen.returncode != 0 and "Set DURABLE_DRILL_SETTINGS to your project's own settings module" in seen.stderr
