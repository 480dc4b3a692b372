"""Workflow versions in production: explicit, audited migrations, and what can be retired."""
from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone
from pydantic import ValidationError

from durable.audit import audit
from durable.engine.json_values import UnstorableJSON, check_storable
from durable.engine.states import TERMINAL, RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import JournalEntry, Run
from durable.permissions import Caller
from durable.registry import UnknownWorkflow, registry
from durable.runtime import transitions
from durable.store.checkpoints import state_at
from durable.workflow import Workflow


def migrate_run(*, run_id: UUID | str, to_version: int, user: Caller | None, source: str,
                reason: str = "") -> Run:
    """Move a BLOCKED_VERSION run onto a newer version that declares a migration from its own."""
    run = Run.objects.get(id=run_id)
    if run.status != RunStatus.BLOCKED_VERSION:
        raise Conflict(f"only runs blocked on their version are migrated; this one is {run.status}", current=run.status)
    try:
        target = registry.get(run.workflow_name, to_version)
    except UnknownWorkflow as exc:
        raise InvalidInput({"to_version": [str(exc)]}) from None
    migration = target.migration_from(run.workflow_version)
    if migration is None:
        raise Conflict(f"{target.name} v{to_version} declares no migration from v{run.workflow_version}",
                       current=run.status)
    position = run.current_step
    new_step = migration.step_map.get(position)
    if new_step is None:
        raise Conflict(f"{target.name} v{to_version}'s migration maps no step for this run's position "
                       f"{position!r}; it cannot be taken over safely", current=run.status)
    checkpoint = run.checkpoints.order_by("-seq").first()
    if checkpoint is None:  # every started run has its first; a run without one has nothing to take over
        raise Conflict("this run has no checkpoint to migrate", current=run.status)
    try:
        state = target.state.model_validate(migration.upcast(dict(state_at(run.id, checkpoint.seq)))
                                            ).model_dump(mode="json")
    except ValidationError as exc:
        raise Conflict(f"the migrated state does not fit v{to_version}'s state model: {exc}", current=run.status) from None
    try:
        check_storable(state)
    except UnstorableJSON as exc:
        raise Conflict(f"the migrated state cannot be stored: {exc.detail}", current=run.status) from None
    return _apply(run, target, new_step, state, checkpoint.seq, user, source, reason)


def _apply(run: Run, target: Workflow, new_step: str, state: dict, seq: int, user: Caller | None,
           source: str, reason: str) -> Run:
    now = timezone.now()
    before = {"workflow_version": run.workflow_version, "step": run.current_step}
    after = {"workflow_version": target.version, "step": new_step}
    with transaction.atomic():
        if not transitions.migrate(run.id, seq=seq, from_version=run.workflow_version, to_version=target.version,
                                   next_step=new_step, state=state, schema_version=target.checkpoint_schema_version,
                                   now=now, **target.contract(), error=None, fencing_token=F("fencing_token") + 1):
            raise Conflict("the run changed meanwhile; nothing was migrated", current=Run.objects.get(id=run.id).status)
        JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.OPERATOR, step=new_step, name="migrate_version",
                                    detail={"before": before, "after": after, "reason": reason,
                                            "by": getattr(user, "username", None)},
                                    fencing_token=run.fencing_token + 1, created_at=now)
        audit(user=user, action="migrate_version", run=run, source=source, status_before=RunStatus.BLOCKED_VERSION,
              status_after=RunStatus.PENDING, reason=reason, detail={"before": before, "after": after})
    run.refresh_from_db()
    return run


def migrate_blocked_runs(*, workflow: str, from_version: int, to_version: int, user: Caller | None,
                         source: str, reason: str = "") -> tuple[list[Run], dict[str, str]]:
    """Migrate every blocked run of a version; returns the migrated runs and why others were refused."""
    migrated, refused = [], {}
    blocked = Run.objects.filter(workflow_name=workflow, workflow_version=from_version,
                                 status=RunStatus.BLOCKED_VERSION).values_list("id", flat=True)
    for run_id in blocked:
        try:
            migrated.append(migrate_run(run_id=run_id, to_version=to_version, user=user, source=source, reason=reason))
        except (Conflict, InvalidInput) as exc:
            refused[str(run_id)] = str(exc)
    return migrated, refused


@dataclass
class VersionReport:
    workflow: str
    version: int
    registered: bool
    latest: bool
    in_flight: dict[str, int]
    blocked: list[tuple[str, str]]  # run id, reason

    @property
    def in_flight_total(self) -> int:
        return sum(self.in_flight.values())

    @property
    def retirable(self) -> bool:
        """Nothing in flight, and newer code takes new runs: the version can be removed."""
        return self.registered and not self.latest and self.in_flight_total == 0


def version_reports() -> list[VersionReport]:
    """Every version that is registered or still has runs, with its in-flight runs by status."""
    counts: dict[tuple[str, int], dict[str, int]] = {}
    rows = (Run.objects.exclude(status__in=[s.value for s in TERMINAL])
            .values("workflow_name", "workflow_version", "status").annotate(n=Count("id")))
    for row in rows:
        counts.setdefault((row["workflow_name"], row["workflow_version"]), {})[row["status"]] = row["n"]
    registered_keys = {(wf.name, wf.version) for wf in registry.all()}
    reports = []
    for name, version in sorted(set(counts) | registered_keys):
        registered = (name, version) in registered_keys
        latest = registered and registry.latest(name).version == version
        blocked = [(str(r.id), (r.error or {}).get("message", "")) for r in
                   Run.objects.filter(workflow_name=name, workflow_version=version, status=RunStatus.BLOCKED_VERSION)
                   .only("id", "error")[:50]]
        reports.append(VersionReport(name, version, registered, latest, counts.get((name, version), {}), blocked))
    return reports
