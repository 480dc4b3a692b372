"""Bulk actions on runs: cancel, retry, pause or resume many runs with one reason, each through its single-run
service.

Which statuses an action applies to is the single-run rule (services.CANCELLABLE, services.RETRYABLE); each
run is changed by the same service function, in its own conditional UPDATE and with its own audit row, the
rows linked by one bulk id. A run that changed meanwhile is skipped and reported, never forced. A cancel takes
parents before their chosen children: a parent's cancel cancels its unfinished children (invariant 19), which are
reported as cancelled with it, and a child cancelled first would wake its parent out of the status confirmed.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from django.db.models import QuerySet

from durable import pauses, services
from durable.conf import durable_settings
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import Run
from durable.permissions import Caller
from durable.services import Batch, Cancellation, SideEffectDone

NOT_APPLICABLE, SKIPPED, NOT_FOUND = "not_applicable", "skipped", "not_found"
SELECTED_FIELDS = ("id", "business_key", "status", "workflow_name", "parent_run_id")


@dataclass(frozen=True)
class BulkAction:
    name: str  # as the single-run action: "cancel", "retry"
    done: str  # the outcome of a run it was applied to: "cancelled"
    statuses: frozenset[RunStatus]  # the single-run rule: where the action applies
    service: Callable[..., Any]  # the single-run service: a Cancellation or the Run

    @property
    def would(self) -> str:
        """The outcome a dry run reports for a run the action applies to: "would_cancel"."""
        return f"would_{self.name}"


BULK_ACTIONS = {action.name: action for action in (
    BulkAction("cancel", "cancelled", services.CANCELLABLE, services.cancel_run),
    BulkAction("retry", "retried", services.RETRYABLE, services.retry_run),
    BulkAction("pause", "paused", pauses.PAUSABLE, pauses.pause_run),
    BulkAction("resume", "resumed", frozenset({RunStatus.PAUSED, RunStatus.BLOCKED_VERSION}), pauses.resume_run),
)}


@dataclass(frozen=True)
class RunOutcome:
    run_id: UUID
    business_key: str
    status: str  # as found (a dry run), or as the action left it
    outcome: str  # would_<action>, <done>, not_applicable, skipped, not_found
    detail: str = ""
    cancellation: Cancellation | None = None
    parent_run_id: UUID | None = field(default=None, compare=False)  # the run that started it, if it is a child

    def as_json(self) -> dict[str, Any]:
        found = {"cancellation": self.cancellation.as_json()} if self.cancellation else {}
        return {"run_id": str(self.run_id), "business_key": self.business_key, "status": self.status,
                "outcome": self.outcome, "detail": self.detail, **found}


@dataclass(frozen=True)
class SideEffectOfRun:
    run_id: UUID
    effect: SideEffectDone


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did to each run, or (a dry run) would do; with, for a cancel, the side effects that
    already happened (not undone) and those possibly in flight."""

    action: BulkAction
    dry_run: bool
    bulk_id: str  # empty on a dry run: nothing was written
    outcomes: tuple[RunOutcome, ...]
    happened: tuple[SideEffectOfRun, ...] = field(default=())
    may_have_happened: tuple[SideEffectOfRun, ...] = field(default=())

    def of(self, outcome: str) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.outcome == outcome]

    @property
    def applied(self) -> list[RunOutcome]:
        """The runs the action applies to (a dry run) or was applied to."""
        return self.of(self.action.would if self.dry_run else self.action.done)

    def counts(self) -> dict[str, int]:
        return {name: len(self.of(name)) for name in self.outcome_names()}

    def outcome_names(self) -> list[str]:
        return [self.action.would if self.dry_run else self.action.done, NOT_APPLICABLE, SKIPPED, NOT_FOUND]

    def as_json(self) -> dict[str, Any]:
        def effects(found: tuple[SideEffectOfRun, ...]) -> list[dict[str, Any]]:
            return [{"run_id": str(e.run_id), "action": e.effect.action, "operation_id": e.effect.operation_id,
                     "status": e.effect.status, "external_ref": e.effect.external_ref} for e in found]

        return {"action": self.action.name, "dry_run": self.dry_run, "bulk_id": self.bulk_id or None,
                "counts": self.counts(),
                "run_ids": {name: [str(o.run_id) for o in self.of(name)] for name in self.outcome_names()},
                "runs": [o.as_json() for o in self.outcomes],
                "already_happened": effects(self.happened), "may_have_happened": effects(self.may_have_happened)}


@dataclass(frozen=True)
class Selection:
    """The runs an operator chose: by id (`asked`; an id with no run is reported), or by a filter's queryset."""

    runs: QuerySet[Run]
    asked: tuple[UUID, ...] | None = None
    by: str = "run_ids"  # the input that chose them, named by the 400 when there are too many

    @classmethod
    def by_ids(cls, run_ids: Sequence[UUID]) -> Selection:
        asked = tuple(dict.fromkeys(run_ids))  # each once, in the order given
        return cls(Run.objects.filter(id__in=asked), asked, "run_ids")

    @classmethod
    def by_filter(cls, runs: QuerySet[Run]) -> Selection:
        return cls(runs, None, "filter")

    def rows(self) -> list[Run]:
        """The selected runs, newest first; more than DURABLE_BULK_LIMIT is a 400 saying the limit."""
        limit = durable_settings.DURABLE_BULK_LIMIT
        if self.asked is not None and len(self.asked) > limit:
            raise too_many(self.by, f"{len(self.asked)} runs were chosen", limit)
        rows = list(self.runs.order_by("-created_at", "-id").only(*SELECTED_FIELDS)[:limit + 1])
        if len(rows) > limit:
            raise too_many(self.by, f"more than {limit} runs match", limit)
        return rows


def too_many(field_name: str, what: str, limit: int) -> InvalidInput:
    return InvalidInput({field_name: [
        f"{what}; a bulk action takes at most {limit} runs at once (DURABLE_BULK_LIMIT). Nothing was done: "
        "narrow the filter, or act in parts"]})


def plan(*, action: str, selection: Selection) -> BulkResult:
    """What the action would do to each selected run, written nowhere: the confirmation and the dry run."""
    spec = BULK_ACTIONS[action]
    rows = selection.rows()
    outcomes = [RunOutcome(r.id, r.business_key, r.status, spec.would, parent_run_id=r.parent_run_id)
                if r.status in spec.statuses else _not_applicable(spec, r) for r in rows]
    outcomes += [RunOutcome(run_id, "", "", NOT_FOUND, "no run has this id") for run_id in _missing(selection, rows)]
    happened: list[SideEffectOfRun] = []
    in_flight: list[SideEffectOfRun] = []
    if spec.name == "cancel":
        for outcome in outcomes:
            if outcome.outcome == spec.would:
                done, maybe = services.side_effects_so_far(outcome.run_id)
                happened += [SideEffectOfRun(outcome.run_id, e) for e in done]
                in_flight += [SideEffectOfRun(outcome.run_id, e) for e in maybe]
    return BulkResult(spec, True, "", tuple(outcomes), tuple(happened), tuple(in_flight))


def perform(*, action: str, selection: Selection, user: Caller, source: str, reason: str,
            confirmed: dict[UUID, str] | None = None) -> BulkResult:
    """Apply the action to each selected run it applies to, one service call (and audit row) per run.

    `confirmed` maps run ids to the status the operator saw when confirming: a run in another status now is
    skipped. The caller has checked the user holds the single-run action's permission.
    """
    planned = plan(action=action, selection=selection)
    spec, bulk_id = planned.action, uuid.uuid4().hex
    done_to: dict[UUID, RunOutcome] = {}
    happened, in_flight = [], []
    for outcome in _parents_first([o for o in planned.outcomes if o.outcome == spec.would]):
        parent = outcome.parent_run_id
        if spec.name == "cancel" and parent in done_to and done_to[parent].outcome == spec.done:
            done = _cancelled_with_parent(spec, outcome, parent)
            if done is not None:
                done_to[outcome.run_id] = done
                continue
        batch = Batch(bulk_id, (confirmed or {}).get(outcome.run_id))
        done = done_to[outcome.run_id] = _apply(spec, outcome, batch, user=user, source=source, reason=reason)
        if done.cancellation is not None:
            happened += [SideEffectOfRun(done.run_id, e) for e in done.cancellation.happened]
            in_flight += [SideEffectOfRun(done.run_id, e) for e in done.cancellation.may_have_happened]
    outcomes = tuple(done_to.get(outcome.run_id, outcome) for outcome in planned.outcomes)  # in the order planned
    return BulkResult(spec, False, bulk_id, outcomes, tuple(happened), tuple(in_flight))


def _parents_first(outcomes: list[RunOutcome]) -> list[RunOutcome]:
    """The outcomes with each run after its chosen ancestors (otherwise in the order given)."""
    parents = {o.run_id: o.parent_run_id for o in outcomes}

    def depth(run_id: UUID) -> int:
        count, parent = 0, parents.get(run_id)
        while parent is not None and parent in parents and count < len(parents):  # bounded, whatever the links
            count, parent = count + 1, parents[parent]
        return count

    return sorted(outcomes, key=lambda o: depth(o.run_id))


def _cancelled_with_parent(spec: BulkAction, outcome: RunOutcome, parent: UUID) -> RunOutcome | None:
    """A chosen child its parent's cancel (in this bulk action) cancelled already; None if it was not."""
    status = Run.objects.filter(id=outcome.run_id).values_list("status", flat=True).first()
    if status != RunStatus.CANCELLED:
        return None
    return replace(outcome, status=status, outcome=spec.done,
                   detail=f"Cancelled with its parent run {parent}, cancelled by this action.")


def _apply(spec: BulkAction, outcome: RunOutcome, batch: Batch, **single: Any) -> RunOutcome:
    """The single-run service on one run; a run that changed meanwhile is skipped, with what it is now."""
    try:
        answer = spec.service(run_id=outcome.run_id, batch=batch, **single)
    except Conflict as exc:
        return RunOutcome(outcome.run_id, outcome.business_key, exc.current or "", SKIPPED, f"{exc}")
    except Run.DoesNotExist:
        return RunOutcome(outcome.run_id, outcome.business_key, "", NOT_FOUND, "the run no longer exists")
    if isinstance(answer, Cancellation):
        return RunOutcome(outcome.run_id, outcome.business_key, answer.run.status, spec.done, answer.summary(),
                          answer)
    return RunOutcome(outcome.run_id, outcome.business_key, answer.status, spec.done)


def _not_applicable(spec: BulkAction, run: Run) -> RunOutcome:
    return RunOutcome(run.id, run.business_key, run.status, NOT_APPLICABLE,
                      f"a {run.status} run cannot be {spec.done}")


def _missing(selection: Selection, rows: list[Run]) -> list[UUID]:
    found = {r.id for r in rows}
    return [run_id for run_id in selection.asked or () if run_id not in found]
