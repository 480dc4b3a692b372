"""Pausing runs and resuming them (docs/operations.md, "Pausing runs"): one run, or every run of a workflow or of
one of its versions at once with its kill switch. The API, the console, bulk actions and commands call these."""
from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from durable.audit import audit
from durable.engine.states import PAUSABLE_AT_ONCE, TERMINAL, RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import PauseSwitch, Run
from durable.permissions import Caller
from durable.registry import registry
from durable.runtime import transitions
from durable.services import Batch
from durable.services import resume_run as resume_blocked_run

PAUSABLE = frozenset(RunStatus) - TERMINAL - {RunStatus.PAUSED}  # where a pause applies (one asked already aside)
# A pause of a run in one of these is asked, not made at once: its worker, or its release by an operator, pauses it.
ASKED = frozenset({RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION})


def _run(run_id: UUID | str, batch: Batch | None) -> Run:
    run = Run.objects.filter(id=run_id).first()
    if run is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    if batch is not None and batch.expected is not None and run.status != batch.expected:
        raise Conflict(f"the run changed from {batch.expected} to {run.status} since you confirmed; nothing was done",
                       current=run.status)
    return run


def _changed_meanwhile(run: Run) -> Conflict:
    current = Run.objects.values_list("status", flat=True).get(id=run.id)
    return Conflict(f"the run changed to {current} meanwhile; nothing was done", current=current)


def _detail(batch: Batch | None, **detail: Any) -> dict[str, Any]:
    """The audit row's detail, with the bulk action's id when it was one."""
    return {**detail, "bulk_id": batch.bulk_id} if batch is not None else detail


def pause_run(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "",
              batch: Batch | None = None) -> Run:
    """Pause a run that has not ended: at once when no worker holds it (a parked run stays parked), else at its
    next step boundary (the call in flight finishes and is recorded). A 409 (Conflict) for a run that has ended,
    is paused already, or changed meanwhile."""
    run = _run(run_id, batch)
    before = RunStatus(run.status)
    if before in TERMINAL:
        raise Conflict(f"cannot pause a run that is {before}: it has ended", current=before)
    if before == RunStatus.PAUSED or run.pause_requested_at is not None:
        raise Conflict("the run is paused already (or will pause at its next step boundary); resume it instead",
                       current=before)
    now, at_once = timezone.now(), before in PAUSABLE_AT_ONCE
    with transaction.atomic():
        change = transitions.pause if at_once else transitions.ask_to_pause
        if not change([run.id], sources={before}, reason=reason, now=now):
            raise _changed_meanwhile(run)
        audit(user=user, action="pause", run=run, source=source, status_before=before,
              status_after=RunStatus.PAUSED if at_once else before, reason=reason,
              detail=_detail(batch, paused="at once" if at_once else "at its next step boundary"))
    run.refresh_from_db()
    return run


def resume_run(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "",
               batch: Batch | None = None) -> Run:
    """Resume a paused run where it stopped (or forget a pause still only asked for); a BLOCKED_VERSION run is
    resumed as durable.services.resume_run does. A 409 (Conflict) for a run that is neither."""
    run = _run(run_id, batch)
    before = run.status
    if before != RunStatus.PAUSED and (run.pause_requested_at is None or before in TERMINAL):
        return resume_blocked_run(run_id=run_id, user=user, source=source, reason=reason)
    with transaction.atomic():
        moved = transitions.unpause([run.id], now=timezone.now(), where=Q(status=before))
        if before == RunStatus.PAUSED and not moved:
            raise _changed_meanwhile(run)
        since = run.pause_requested_at.isoformat() if run.pause_requested_at else None
        audit(user=user, action="resume", run=run, source=source, status_before=before,
              status_after=RunStatus.PENDING if moved else before, reason=reason,
              detail=_detail(batch, paused_since=since, pause_reason=run.pause_reason))
    run.refresh_from_db()
    return run


def _switch_runs(workflow: str, version: int) -> Q:
    """The runs a switch of `workflow` (one version, or every one) covers."""
    if version == PauseSwitch.EVERY_VERSION:
        return Q(workflow_name=workflow)
    return Q(workflow_name=workflow, workflow_version=version)


def _checked(workflow: Any, version: Any, reason: Any) -> tuple[str, int]:
    errors: dict[str, list[str]] = {}
    versions = {wf.version for wf in registry.all() if wf.name == workflow}
    if not versions:
        errors["workflow"] = [f"no workflow named {workflow!r} is registered"]
    if version not in (None, "", PauseSwitch.EVERY_VERSION) and (
            not isinstance(version, int) or version not in versions):
        errors["version"] = [f"{workflow!r} has no version {version!r}; registered: "
                             f"{', '.join(str(v) for v in sorted(versions)) or 'none'}"]
    if not str(reason or "").strip():
        errors["reason"] = ["say why every run of it stops: the reason is shown on each paused run"]
    if errors:
        raise InvalidInput(errors)
    return workflow, int(version or PauseSwitch.EVERY_VERSION)


def pause_workflow(*, workflow: str, version: int | None = None, user: Caller | None, source: str,
                   reason: str) -> tuple[PauseSwitch, int]:
    """Turn a workflow's kill switch off (of one version, or every version when `version` is None): its runs in
    flight stop at their next step boundary, runs no worker holds pause at once, and new starts are accepted and
    held PAUSED until it is turned on again. The switch, and how many runs it paused or asked."""
    name, number = _checked(workflow, version, reason)
    now = timezone.now()
    with transaction.atomic():
        try:
            with transaction.atomic():
                switch = PauseSwitch.objects.create(workflow_name=name, workflow_version=number, reason=reason,
                                                    created_by=user if user is not None and user.is_authenticated
                                                    else None)
        except IntegrityError:
            raise Conflict(f"{name} is paused already{_of(number)}; turn it on again first") from None
        runs = list(Run.objects.filter(_switch_runs(name, number), pause_requested_at__isnull=True)
                    .exclude(status__in=sorted(TERMINAL | {RunStatus.PAUSED})).values_list("id", flat=True))
        paused = transitions.pause(runs, sources=PAUSABLE_AT_ONCE, reason=reason, now=now, by_switch=True)
        asked = transitions.ask_to_pause(runs, sources=ASKED, reason=reason, now=now, by_switch=True)
        audit(user=user, action="pause_workflow", run=None, source=source, status_before="", status_after="",
              reason=reason, detail={"workflow": name, "version": number or None, "paused": paused, "asked": asked})
    return switch, paused + asked


def resume_workflow(*, switch_id: int, user: Caller | None, source: str, reason: str = "") -> int:
    """Turn a kill switch on again: the runs it paused resume (those a person paused, or another switch still
    covers, stay paused). How many resumed. A 404 (PauseSwitch.DoesNotExist) for a switch that is not off."""
    now = timezone.now()
    with transaction.atomic():
        switch = PauseSwitch.objects.select_for_update().get(id=switch_id)
        name, number = switch.workflow_name, switch.workflow_version
        switch.delete()
        still = Q(pk__in=[])
        for other in PauseSwitch.objects.filter(workflow_name=name):
            still |= _switch_runs(name, other.workflow_version)
        runs = list(Run.objects.filter(_switch_runs(name, number), paused_by_switch=True).exclude(still)
                    .values_list("id", flat=True))
        resumed = transitions.unpause(runs, now=now, where=Q(paused_by_switch=True))
        audit(user=user, action="resume_workflow", run=None, source=source, status_before="", status_after="",
              reason=reason, detail={"workflow": name, "version": number or None, "resumed": resumed})
    return resumed


def _of(version: int) -> str:
    return f" (version {version})" if version != PauseSwitch.EVERY_VERSION else " (every version)"
