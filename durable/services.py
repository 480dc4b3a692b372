"""Run operations that the API, the console and commands all call: one place per rule."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from durable import budgets, fleet, metrics, tracing
from durable.audit import acting_user, audit
from durable.engine.active_runs import OnActiveBusinessKey
from durable.engine.call_limits import check_priority
from durable.engine.ids import request_hash
from durable.engine.json_values import UnstorableJSON, check_storable
from durable.engine.ledger import OperationStatus
from durable.engine.search import field_text, fold, searchable_fields
from durable.engine.states import TERMINAL, IllegalTransition, RunStatus, sources_of
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import Run, RunSearch, SideEffect
from durable.permissions import Caller
from durable.registry import UnknownWorkflow, registry
from durable.runtime import transitions, wakes
from durable.signals import run_cancelled
from durable.workflow import Workflow


def _field_errors(exc: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "__root__"
        errors.setdefault(field, []).append(err["msg"])
    return errors


def _refuse_unstorable_start(business_key: str, input: dict[str, Any], state: dict[str, Any]) -> None:
    """InvalidInput, before anything is written, for a business key, input or first state the database cannot
    store (durable.engine.json_values): the API's fields refuse them already, this is every other caller's."""
    try:
        check_storable(business_key)
    except UnstorableJSON as exc:
        raise InvalidInput({"business_key": [exc.problem]}) from None
    try:
        check_storable(input)
    except UnstorableJSON as exc:
        raise InvalidInput({"input": {".".join(map(str, exc.path)) or "__root__": [exc.problem]}}) from None
    try:
        check_storable(state)
    except UnstorableJSON as exc:
        raise InvalidInput({"input": {"__root__": [f"the first state built from it cannot be stored: {exc.detail}"]}}) \
            from None


START_OLDER_VERSION = "durable.start_older_version"


@tracing.starts_run
def start_run(*, workflow: str, input: dict[str, Any], business_key: str, idempotency_key: str | None = None,
              user: Caller | None = None, enqueue: bool = True, version: int | None = None,
              reason: str = "", source: str = "api", allow_older_version: bool = False,
              parent_run_id: UUID | None = None, priority: int = 0) -> tuple[Run, bool]:
    """Start a run of the current version of `workflow`; returns (run, created).

    With an idempotency key, a retried request returns the run the first one started. A business key that
    already has an active run gets the workflow's `on_active_business_key` answer: that run (created False),
    a Conflict naming it, or a new run; two concurrent starts cannot both create (a partial unique constraint).
    `enqueue=False` leaves the run for the sweeper (or a caller that enqueues it later).
    `version` chooses an older registered version: that needs START_OLDER_VERSION and is audited with `reason`
    (or, for in-process tools and tests only, `allow_older_version`; nothing a client sends sets it).
    `priority` (-100..100, higher first) orders the run among runs waiting for a named limit's room.
    """
    try:
        check_priority(priority)
    except ValueError as exc:
        raise InvalidInput({"priority": [str(exc)]}) from None
    definition, by_permission = _version_to_start(workflow, version, user, allow_older_version)
    if by_permission and not reason.strip():
        raise InvalidInput({"reason": [f"starting {workflow} v{definition.version}, an older version than the "
                                       "current one, needs a reason: it is audited"]})
    try:
        data = definition.input.model_validate(input)
    except ValidationError as exc:
        raise InvalidInput({"input": _field_errors(exc)}) from None
    stored_input = data.model_dump(mode="json")
    state = definition.build_initial_state(data).model_dump(mode="json")
    _refuse_unstorable_start(business_key, stored_input, state)
    fingerprint = request_hash({"workflow": workflow, "input": stored_input, "business_key": business_key})
    if idempotency_key:
        existing = _run_for_key(idempotency_key, fingerprint)
        if existing is not None:
            metrics.idempotency_key_hit(metrics.START_RUN)
            return existing, False
    policy = definition.on_active_business_key
    if policy.one_active_run and (active := _active_run(workflow, business_key, policy)) is not None:
        return active, False
    try:
        with transaction.atomic():
            run = transitions.start(
                **definition.contract(), **definition.budget_fields(), business_key=business_key,
                idempotency_key=idempotency_key or None,
                one_active_per_business_key=policy.one_active_run,
                start_request_hash=fingerprint, input=stored_input, next_step=definition.first_step, state=state,
                schema_version=definition.checkpoint_schema_version, enqueue=enqueue,
                created_by_id=_creator(user, parent_run_id), enqueued_at=timezone.now(), parent_run_id=parent_run_id,
                priority=priority,
                **tracing.run_fields(),
            )
            _index_for_search(run, definition, data)
            if by_permission:
                audit(user=user, action="start_older_version", run=run, source=source, status_before="",
                      status_after=run.status, reason=reason.strip(),
                      detail={"version": definition.version, "current_version": registry.current(workflow).version})
    except IntegrityError:
        if idempotency_key:  # a concurrent request with the same key won the race
            existing = _run_for_key(idempotency_key, fingerprint)
            if existing is not None:
                metrics.idempotency_key_hit(metrics.START_RUN)
                return existing, False
        # A concurrent start of the same business key won the race (run_one_active_per_business_key).
        if policy.one_active_run and (active := _active_run(workflow, business_key, policy)) is not None:
            return active, False
        raise
    return run, True


def _creator(user: Caller | None, parent_run_id: UUID | None) -> Any:
    """Who created the run; a child run is created by whoever created its parent, so a tool's child stays in
    the tool's scope (invariant 14) and only the tool's own workers sweep it."""
    if parent_run_id is not None:
        return Run.objects.values_list("created_by_id", flat=True).get(id=parent_run_id)
    actor = acting_user(user)
    return actor.pk if actor is not None else None


def _index_for_search(run: Run, definition: Workflow, data: BaseModel) -> None:
    """What the console's search box finds the run by: its business key and its workflow's searchable fields."""
    fields = searchable_fields(data.model_dump(mode="json"), definition.searchable)
    RunSearch.objects.create(run=run, created_at=run.created_at, business_key=fold(run.business_key),
                             field_text=field_text(fields), fields=fields)


def _active_run(workflow: str, business_key: str, policy: OnActiveBusinessKey) -> Run | None:
    """The run of `workflow` for `business_key` that has not ended, as the workflow's policy answers it:
    returned (RETURN_EXISTING), or a Conflict naming it (REFUSE)."""
    active = (Run.objects.filter(workflow_name=workflow, business_key=business_key)
              .exclude(status__in=TERMINAL).order_by("created_at").first())
    if active is not None and policy is OnActiveBusinessKey.REFUSE:
        raise Conflict(f"{workflow} already has an active run for business key {business_key!r}: run {active.id}, "
                       f"{active.status}. It refuses a second one (on_active_business_key=refuse): wait for that run "
                       "to end, or cancel it", current=active.status, active_run=str(active.id))
    return active


def _version_to_start(workflow: str, version: int | None, user: Caller | None,
                      allow_older_version: bool) -> tuple[Workflow, bool]:
    """The workflow version a new run starts on, and whether a person's permission to start an older version
    than the current one was used (invariant 12): that start is audited."""
    try:
        current = registry.current(workflow)
    except UnknownWorkflow:  # which processes have it, and so which ones to restart
        raise InvalidInput({"workflow": [fleet.not_loaded_here(workflow)]}) from None
    if version is None or version == current.version:
        return current, False
    try:
        chosen = registry.get(workflow, version)
    except UnknownWorkflow:
        raise InvalidInput({"version": [f"{workflow} has no registered version {version}; "
                                        f"the current one is {current.version}"]}) from None
    if allow_older_version:
        return chosen, False
    if not (user is not None and user.has_perm(START_OLDER_VERSION)):
        raise Forbidden(f"{workflow} v{version} only finishes the runs pinned to it; new runs start on the current "
                        f"version, v{current.version}. Starting an older version needs the "
                        f"{START_OLDER_VERSION} permission", action="start_older_version")
    return chosen, True


def _run_for_key(key: str, fingerprint: str) -> Run | None:
    existing = Run.objects.filter(idempotency_key=key).first()
    if existing is not None and existing.start_request_hash != fingerprint:
        raise Conflict(
            f"idempotency key {key!r} was already used for a different request (run {existing.id}); "
            "use a new key for a new run", current=existing.status,
        )
    return existing


CANCELLABLE = frozenset(RunStatus) - TERMINAL  # a cancel applies to any run that has not ended
RETRYABLE = frozenset({RunStatus.WAITING_RETRY, RunStatus.FAILED})


@dataclass(frozen=True)
class Batch:
    """One of many runs an operator acted on at once: the bulk id links their audit rows, and `expected` is the
    status the operator confirmed the run in (a run that changed since is left alone, never forced)."""

    bulk_id: str
    expected: str | None = None


def _transition(run_id: UUID | str, *, target: RunStatus, allowed: frozenset[RunStatus], action: str,
                user: Caller | None, source: str, reason: str, fields: dict[str, Any],
                then: Callable[[Run], dict[str, Any] | None] | None = None, batch: Batch | None = None,
                where: Q | None = None) -> Run:
    """Move a run from one of `allowed` to `target` through the one door (durable.runtime.transitions), audited;
    `where` is more of the condition (what the run waits on, say), checked in the same UPDATE. A run that is not in
    `allowed`, or changed meanwhile, is a Conflict (the API's 409)."""
    run = Run.objects.filter(id=run_id).first()
    if run is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    before = run.status
    if batch is not None and batch.expected is not None and before != batch.expected:
        raise Conflict(f"the run changed from {batch.expected} to {before} since you confirmed; nothing was done",
                       current=before)
    if RunStatus(before) not in allowed:
        raise Conflict(f"cannot {action} a run that is {before}", current=before)
    with transaction.atomic():
        try:
            with transaction.atomic():
                updated = transitions.move(run.id, target, sources={before}, where=where, **fields)
        except IllegalTransition:  # `allowed` names more than the state table does: still this run's conflict
            raise Conflict(f"cannot {action} a run that is {before}", current=before) from None
        except IntegrityError:  # a FAILED run retried after another run of its business key started
            raise Conflict(f"cannot {action} this run: another run of {run.workflow_name} for business key "
                           f"{run.business_key!r} is active, and the workflow allows one at a time", current=before,
                           ) from None
        if not updated:
            current = Run.objects.values_list("status", flat=True).get(id=run.id)
            raise Conflict(f"the run changed to {current} meanwhile; nothing was done", current=current)
        # What `then` finds (say, what a cancel stopped) goes into the audit row, read in the same transaction.
        detail = then(run) if then is not None else None
        if batch is not None:
            detail = {**(detail or {}), "bulk_id": batch.bulk_id}
        audit(user=user, action=action, run=run, source=source, status_before=before, status_after=target,
              reason=reason, detail=detail)
    run.refresh_from_db()
    return run


@dataclass(frozen=True)
class SideEffectDone:
    """A side effect of the run, as the ledger records it when the run is cancelled."""

    action: str
    operation_id: str
    status: str
    external_ref: str

    def describe(self) -> str:
        ref = f", reference {self.external_ref}" if self.external_ref else ""
        return f"{self.action} (operation {self.operation_id}{ref})"


@dataclass(frozen=True)
class Cancellation:
    """What a cancel found: what had already happened (a cancel undoes nothing), what may have happened, and
    what it stopped. The console shows `summary()`, the API answers `as_json()`, the audit row records it."""

    run: Run
    happened: tuple[SideEffectDone, ...]  # SUCCEEDED downstream: done, and stays done
    may_have_happened: tuple[SideEffectDone, ...]  # STARTED or UNKNOWN: the ledger will say
    stopped: tuple[str, ...]

    def summary(self) -> str:
        parts = ["Cancelled. The run will not run again."]
        if self.happened:
            parts.append("Already done, and not undone by cancelling: "
                         f"{'; '.join(e.describe() for e in self.happened)}.")
        if self.may_have_happened:
            parts.append("May have happened: " + "; ".join(
                f"{e.describe()}, {e.status}" for e in self.may_have_happened)
                + ". A call in flight may still complete; its ledger row will say, and Reconciliation shows it.")
        if not self.happened and not self.may_have_happened:
            parts.append("No side effect of it had happened.")
        if self.stopped:
            parts.append(f"Stopped: {'; '.join(self.stopped)}.")
        return " ".join(parts)

    def findings(self) -> dict[str, Any]:
        """What the audit row of the cancel records."""
        return {"already_happened": [asdict(e) for e in self.happened],
                "may_have_happened": [asdict(e) for e in self.may_have_happened], "stopped": list(self.stopped)}

    def as_json(self) -> dict[str, Any]:
        return {**self.findings(), "summary": self.summary()}


def cancel_run(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "",
               batch: Batch | None = None) -> Cancellation:
    """Cancel a run that has not ended, saying what had already happened and what the cancel stopped.

    A worker holding it loses its lease at its next write; a downstream call it has in flight is not recalled.
    """
    found: list[Cancellation] = []

    def stop(run: Run) -> dict[str, Any]:
        found.append(_what_the_cancel_finds(run, user, source))
        return found[0].findings()

    with wakes.child_ends(run_id, wakes.parent_of(run_id)):  # a parent waiting on it learns it was cancelled
        run = _transition(
            run_id, target=RunStatus.CANCELLED, allowed=CANCELLABLE, action="cancel", user=user,
            source=source, reason=reason, batch=batch,
            fields={"lease_owner": None, "lease_expires_at": None, "fencing_token": F("fencing_token") + 1,
                    "finished_at": timezone.now(), "next_attempt_at": None,
                    "error": None},  # a cancelled run did not fail: the errors before it stay in the timeline
            then=stop,
        )
    return replace(found[0], run=run)  # the run as the cancel left it


MAY_HAVE_HAPPENED = (OperationStatus.STARTED, OperationStatus.UNKNOWN)


def side_effects_so_far(run_id: UUID | str) -> tuple[tuple[SideEffectDone, ...], tuple[SideEffectDone, ...]]:
    """What a cancel of the run would not undo: its side effects that happened, and those that may have."""
    ledger = [SideEffectDone(action=row.action_name, operation_id=row.operation_id, status=row.status,
                             external_ref=row.external_ref or "")
              for row in SideEffect.objects.filter(run_id=run_id).order_by("created_at", "operation_id")]
    return (tuple(e for e in ledger if e.status == OperationStatus.SUCCEEDED),
            tuple(e for e in ledger if e.status in MAY_HAVE_HAPPENED))


def _what_the_cancel_finds(run: Run, user: Caller | None, source: str) -> Cancellation:
    """Inside the cancel's transaction: the run's ledger, and what the cancel stops (`run` as it was before),
    its unfinished child runs included (invariant 19)."""
    happened, may_have_happened = side_effects_so_far(run.id)
    stopped = []
    if run.status == RunStatus.RUNNING and run.lease_owner:
        stopped.append(f"step {run.current_step!r}, running on {run.lease_owner}: it loses its lease at its next "
                       "write, and no further step starts")
    elif run.current_step:
        stopped.append(f"step {run.current_step!r} and every step after it ({run.status} until now)")
    # The apps built on the core (approvals closes the run's requests) listen and say what they stopped;
    # the core imports none of them.
    for _, what_it_stopped in run_cancelled.send(sender=Run, run=run):
        stopped.extend(what_it_stopped or ())
    stopped.extend(_cancel_children(run, user, source))
    return Cancellation(run, happened, may_have_happened, tuple(stopped))


def _cancel_children(run: Run, user: Caller | None, source: str) -> list[str]:
    """Cancel the run's unfinished children (and theirs), each audited; what the parent's report says of them."""
    stopped = []
    for child in Run.objects.filter(parent_run_id=run.id).exclude(status__in=sorted(TERMINAL)).order_by("created_at"):
        try:
            cancel_run(run_id=child.id, user=user, source=source, reason=f"its parent run {run.id} was cancelled")
        except Conflict:  # it ended meanwhile: nothing to stop
            continue
        stopped.append(f"child run {child.id} ({child.workflow_name}, {child.status} until now)")
    return stopped


def retry_run(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "",
              batch: Batch | None = None) -> Run:
    """Run a waiting retry now, or give a failed run another go from its last checkpoint."""
    return _transition(
        run_id, target=RunStatus.PENDING, allowed=RETRYABLE, action="retry", user=user, source=source, reason=reason,
        batch=batch,
        fields={"next_attempt_at": None, "attempt": 0, "error": None, "finished_at": None, "enqueued_at": timezone.now()},
    )


def resume_run(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "") -> Run:
    """Ask a worker to check a blocked run's replay contract again (after the version is deployed)."""
    allowed = sources_of(RunStatus.PENDING) & frozenset({RunStatus.BLOCKED_VERSION})
    return _transition(
        run_id, target=RunStatus.PENDING, allowed=allowed, action="resume", user=user, source=source, reason=reason,
        fields={"error": None, "enqueued_at": timezone.now()},
    )


def raise_budget(*, run_id: UUID | str, user: Caller | None, source: str, reason: str = "", tokens: Any = None,
                 cost: Any = None) -> Run:
    """Raise the budget of a run its budget stopped (it waits in NEEDS_ATTENTION): the run goes on from the visit
    it stopped in, which reuses what it recorded and makes the model call it stopped before. A 409 (Conflict) when
    the run no longer waits on its budget; InvalidInput naming a limit that is not raised enough."""
    run = Run.objects.filter(id=run_id).first()
    if run is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    if not budgets.waiting_on_budget(run):
        raise Conflict(f"the run is {run.status} and does not wait on its budget: there is nothing to raise",
                       current=run.status)
    before, raised = budgets.budget_of(run), budgets.raised_budget(run, tokens=tokens, cost=cost)
    detail = {"budget_before": before.as_json() if before else None, "budget_after": raised.as_json(),
              "spent": budgets.spent(run).as_json()}
    return _transition(
        run_id, target=RunStatus.PENDING, allowed=frozenset({RunStatus.NEEDS_ATTENTION}), action="raise_budget",
        user=user, source=source, reason=reason, where=budgets.WAITING_ON_BUDGET, then=lambda _: detail,
        fields={"budget_tokens": raised.tokens, "budget_cost": raised.cost, "error": None,
                "enqueued_at": timezone.now()},
    )
