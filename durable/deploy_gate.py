"""The deploy gate: which unfinished runs the workflow code installed here would refuse to resume.

A deploy pipeline runs `manage.py durable_versions --check` with the new code, before the new
workers start: the same replay contract the executor applies at resume (invariant 7) is applied
to every run that has not finished, without touching any of them; and each one's current visit is
replayed on the new code (durable.replayer), so a change inside a step that would hold a run on a
replay mismatch (a reworded email it already sent) is caught too.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import OuterRef, Subquery

from durable.engine.contract import Refusal, check_contract, upcast
from durable.engine.states import TERMINAL
from durable.models import Checkpoint, Run
from durable.registry import UnknownWorkflow, WorkflowRegistry, registry
from durable.replay_records import from_database
from durable.replayer import RunReplay, replay_runs
from durable.runtime.executor import run_contract
from durable.store.checkpoints import holds_whole, state_at
from durable.workflow import Workflow


@dataclass(frozen=True)
class BlockedRun:
    """A run the installed code would stop in BLOCKED_VERSION, and the migration that could take it over."""

    run_id: str
    workflow: str
    version: int
    status: str
    step: str
    refusal: Refusal
    migration: str | None  # "v2 takes step 'approval' to 'risk_check'", or None when nothing covers it


def resume_refusal(run: Run, state: dict, state_schema_version: int, workflow: Workflow | None) -> Refusal | None:
    """What the executor would say before running a step of `run` on `workflow`: None when it resumes."""
    refusal = check_contract(run_contract(run), workflow.as_contract() if workflow else None,
                             workflow.pinned if workflow else ())
    if refusal is not None or workflow is None:
        return refusal
    try:
        readable = upcast(state, state_schema_version, workflow.checkpoint_schema_version, workflow.upcasters)
        if isinstance(readable, Refusal):
            return readable
        workflow.state.model_validate(readable)
    except Exception as exc:  # an upcaster's bug or a state that no longer validates, as the executor sees it
        return Refusal("schema_unreadable", f"the newest checkpoint (schema v{state_schema_version}) cannot be "
                                            f"read as {workflow.state.__name__}: {exc}")
    return None


def covering_migration(run: Run, workflows: WorkflowRegistry) -> str | None:
    """A registered version that declares a migration from the run's version mapping its position."""
    for target in workflows.all():
        if target.name != run.workflow_name or target.version == run.workflow_version:
            continue
        migration = target.migration_from(run.workflow_version)
        if migration is not None and run.current_step in migration.step_map:
            return (f"v{target.version} declares a migration from v{run.workflow_version} that takes step "
                    f"{run.current_step!r} to {migration.step_map[run.current_step]!r}")
    return None


def blocked_runs(workflows: WorkflowRegistry = registry) -> Iterator[BlockedRun]:
    """Every unfinished run the code registered in `workflows` would block, oldest first."""
    newest = Checkpoint.objects.filter(run=OuterRef("pk")).order_by("-seq")
    unfinished = (Run.objects.exclude(status__in=[s.value for s in TERMINAL])
                  .annotate(point_state=Subquery(newest.values("state")[:1]),
                            point_schema=Subquery(newest.values("state_schema_version")[:1]))
                  .order_by("created_at", "id"))
    for run in unfinished.iterator(chunk_size=500):
        try:
            workflow: Workflow | None = workflows.get(run.workflow_name, run.workflow_version)
        except UnknownWorkflow:
            workflow = None
        point_state = run.point_state
        if not holds_whole(point_state) and run.point_schema is not None:  # a difference, or large values apart
            point_state = state_at(run.id, run.checkpoint_seq)
        refusal = resume_refusal(run, point_state or {}, run.point_schema or 1, workflow)
        if refusal is not None:
            yield BlockedRun(str(run.id), run.workflow_name, run.workflow_version, run.status, run.current_step,
                             refusal, covering_migration(run, workflows))


def held_runs(workflows: WorkflowRegistry = registry) -> Iterator[RunReplay]:
    """Every unfinished run whose current visit, replayed on the code registered in `workflows`, asks for something
    else than it recorded: a worker would hold it (BLOCKED_VERSION, replay_violation) when it runs that visit again."""
    unfinished = Run.objects.exclude(status__in=[s.value for s in TERMINAL]).order_by("created_at", "id")
    for report in replay_runs(from_database(unfinished), workflows, current_visit_only=True):
        if report.mismatches:
            yield report


@dataclass(frozen=True)
class PatchUse:
    """A patch the code asks in unfinished runs' current visits: how many take its old branch (False), its new."""

    workflow: str
    version: int
    patch: str
    old_branch: int
    new_branch: int


def patch_uses(workflows: WorkflowRegistry = registry) -> list[PatchUse]:
    """The patches unfinished runs still depend on, from their current visits replayed on this code (recorded answers
    first): a patch whose old branch no run takes can lose it (docs/workflow-versions.md, "Patches")."""
    counts: dict[tuple[str, int, str], list[int]] = {}
    unfinished = Run.objects.exclude(status__in=[s.value for s in TERMINAL]).order_by("created_at", "id")
    for report in replay_runs(from_database(unfinished), workflows, current_visit_only=True):
        for patch, taken in report.patches.items():
            counts.setdefault((report.workflow, report.version, patch), [0, 0])[taken] += 1
    return [PatchUse(workflow, version, patch, old, new)
            for (workflow, version, patch), (old, new) in sorted(counts.items())]


@dataclass(frozen=True)
class StrandedSchedule:
    """A schedule the installed code could not fire: its workflow is gone, or its input no longer fits."""

    name: str
    workflow: str
    problem: str


def stranded_schedules(workflows: WorkflowRegistry = registry) -> Iterator[StrandedSchedule]:
    """Every active schedule whose next fire time would start no run on the code registered in `workflows`."""
    from durable.models import Schedule

    for schedule in Schedule.objects.filter(paused=False).order_by("name"):
        try:
            current = workflows.current(schedule.workflow)
        except UnknownWorkflow:
            yield StrandedSchedule(schedule.name, schedule.workflow, "its workflow is no longer registered")
            continue
        try:
            current.input.model_validate(schedule.input)
        except Exception as exc:  # pydantic's ValidationError, as start_run would meet it at the fire time
            yield StrandedSchedule(schedule.name, schedule.workflow,
                                   f"its input does not fit v{current.version}'s input model: {exc}")
