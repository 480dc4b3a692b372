"""The worker's side of an approval: ask, wait, and revalidate right before the run acts.

A step calls `ctx.request_approval(...)`. The first time, the request is created and the run
is released in WAITING_APPROVAL (one transaction, fenced on the lease). After a decision,
an expiry or an invalidation, the run is enqueued again and the step runs again from its
checkpoint; this time the request's status decides what the step gets.

A request belongs to the visit that asked and to its place in it (the n-th request_approval of
the visit), so several approvals in one step, or one per loop iteration, each settle on their
own. An approval the run revalidated and went on to act on is marked used: the verdict is
recorded once, like an activity's result, and a re-execution of the visit (after a crash past
the approved action) takes it instead of revalidating against the run's own action.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn

from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from durable.engine.approvals import ApprovalStatus, Path, Revalidation, approvers_needed, object_hash, snapshot_hash
from durable.engine.errors import (
    ApprovalExpired,
    ApprovalInvalidated,
    ApprovalPreconditionFailed,
    ApprovalRejected,
    AwaitingApproval,
    refuse_unstorable,
)
from durable.engine.notifications import EventKind
from durable.models import JournalEntry
from durable.runtime import transitions
from durable.runtime.gates import ApprovalAsk, GateSite
from durable.signals import operator_event
from durable.store import Lease, RunStore

MAX_ASKS = 5  # asking again is for facts that moved, not a loop
PRECONDITION_FAILED = "precondition failed"  # the journal's word for a request refused on its facts before asking

Revalidate = Callable[[dict[str, Any]], Revalidation]


def request_approval(site: GateSite, ask: ApprovalAsk) -> dict[str, Any]:
    """The gate behind `ctx.request_approval`, registered from ApprovalsConfig.ready() (durable/runtime/gates.py)."""
    _check(ask)
    gate = Gate(site.store, site.lease, site.run_id, site.step, site.workflow_name, site.workflow_version,
                site.business_key, site.visit, site.position)
    return gate.request(ask)


def _check(ask: ApprovalAsk) -> None:
    """What a step asks for is declared in code, the same every time the step runs: refused now if unusable."""
    revalidation_path(ask.revalidate)  # refuse a lambda or closure now, not when a human decides
    if not callable(ask.approvers) and ask.approvers < 1:
        raise ValueError("approvers must be at least 1")
    if ask.expires_in <= timedelta(0):
        raise ValueError("expires_in must be positive")


def revalidation_path(fn: Revalidate) -> str:
    """The import path stored on the request, so the console can revalidate without the step."""
    qualname = getattr(fn, "__qualname__", "")
    if not qualname or "<" in qualname:
        raise TypeError("revalidate must be a module-level function, so the console can call it too")
    return f"{fn.__module__}:{qualname}"


def load_revalidation(path: str) -> Revalidate:
    module_name, _, qualname = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


@dataclass
class Gate:
    """One step's approval gate, under the worker's lease."""

    store: RunStore
    lease: Lease
    run_id: Any
    step: str
    workflow_name: str
    workflow_version: int
    business_key: str
    visit: int = 0
    position: int = 1

    def request(self, ask: ApprovalAsk) -> dict[str, Any]:
        latest = (ApprovalRequest.objects.filter(run_id=self.run_id, step=self.step, visit=self.visit,
                                                 position=self.position)
                  .select_related("decided_by").order_by("-ask").first())
        if latest is None:
            latest = self._carried_across_a_migration()
        if latest is None:
            return self._ask(ask, 1)
        status = ApprovalStatus(latest.status)
        if status == ApprovalStatus.PENDING:  # enqueued again with no decision yet: keep waiting
            self._wait(latest, "still waiting")
            raise AwaitingApproval(latest.id)
        if status == ApprovalStatus.APPROVED and latest.used_at is not None:
            return self._granted(latest)  # this visit acted on it already: its verdict stands (module docstring)
        if status == ApprovalStatus.APPROVED:
            return self._use(ask, latest)
        if status == ApprovalStatus.REJECTED:
            who = latest.decided_by.get_username() if latest.decided_by else "someone"
            raise ApprovalRejected(f"{latest.kind} was rejected by {who}: {latest.reason}")
        path = ask.on_expiry if status == ApprovalStatus.EXPIRED else ask.on_invalid
        return self._take(path, ask, latest)

    def _carried_across_a_migration(self) -> ApprovalRequest | None:
        """A request asked here (this step, this place) by the visit an operator's migration took the run over
        from, never acted on: the run takes it up in this visit, the first of this step since the migration, as it
        did before requests belonged to visits. It is still revalidated before the run acts on it."""
        earlier = (ApprovalRequest.objects.filter(run_id=self.run_id, step=self.step, position=self.position,
                                                  visit__lt=self.visit, used_at__isnull=True)
                   .order_by("-visit", "-ask").first())
        if earlier is None:
            return None
        if not transitions.taken_over_by_migration(self.run_id, earlier.visit, self.visit, self.step):
            return None  # no migration since, or a loop's earlier visit
        ApprovalRequest.objects.filter(run_id=self.run_id, step=self.step, visit=earlier.visit,
                                       position=self.position).update(visit=self.visit)
        return (ApprovalRequest.objects.filter(run_id=self.run_id, step=self.step, visit=self.visit,
                                               position=self.position)
                .select_related("decided_by").order_by("-ask").first())

    def _use(self, ask: ApprovalAsk, approved: ApprovalRequest) -> dict[str, Any]:
        """Approved: revalidate once more, right before the run acts on it."""
        problems: tuple[str, ...] = ()
        approve = self._object(ask, approved.snapshot)
        if object_hash(approve) != approved.object_hash:
            problems = ("what the step would do differs from what was approved",)
        check = load_revalidation(approved.revalidate)(approved.snapshot)
        problems = problems + check.problems
        approvers = list(approved.decisions.filter(verdict="approve").values_list("user__username", flat=True))
        needed = approvers_needed(approved.approvers_required, check.approvers_required)
        if len(set(approvers)) < needed:
            problems += (f"the facts now need {needed} approvers; {len(set(approvers))} approved",)
        if problems:
            self._invalidate(approved, check.current, problems)
            return self._take(ask.on_invalid, ask, approved)
        with transaction.atomic():  # the verdict is recorded once, fenced: a re-execution of the visit takes it
            self.store.fence(self.lease)
            ApprovalRequest.objects.filter(id=approved.id, status=ApprovalStatus.APPROVED, used_at__isnull=True).update(
                used_at=timezone.now(), last_check={"current": check.current, "problems": []})
            self.store.journal(self.lease, JournalEntry.Kind.APPROVAL, self.step, detail={
                "event": "approval_used", "request": str(approved.id), "snapshot_hash": approved.snapshot_hash,
                "revalidated": check.current,
            })
        return self._granted(approved, approvers)

    @staticmethod
    def _granted(approved: ApprovalRequest, approvers: list[str] | None = None) -> dict[str, Any]:
        """What the step gets for an approval that holds."""
        if approvers is None:
            approvers = list(approved.decisions.filter(verdict="approve").values_list("user__username", flat=True))
        return {"request": str(approved.id), "approved_by": approvers, "object": approved.approval_object,
                "snapshot_hash": approved.snapshot_hash, "object_hash": approved.object_hash,
                "decided_at": approved.decided_at.isoformat() if approved.decided_at else None}

    def _take(self, path: Path, ask: ApprovalAsk, latest: ApprovalRequest) -> dict[str, Any]:
        expired = latest.status == ApprovalStatus.EXPIRED
        if path == Path.ASK_AGAIN and latest.ask < MAX_ASKS:
            return self._ask(ask, latest.ask + 1)
        message = f"the {latest.kind} approval {'expired' if expired else 'was invalidated'}: "
        raise (ApprovalExpired if expired else ApprovalInvalidated)(message + (latest.reason or "no decision in time"))

    def _ask(self, ask: ApprovalAsk, number: int) -> dict[str, Any]:
        self._refused_before(ask)
        snapshot = ask.snapshot() if callable(ask.snapshot) else ask.snapshot
        # What an approver sees and its hash binds, chosen before anyone is asked: refused, never altered.
        refuse_unstorable(snapshot, what=f"the snapshot of approval {ask.kind!r}", kind="snapshot_not_storable")
        check = ask.revalidate(snapshot)
        if not check.holds:  # no human should be asked to approve on facts that already fail
            self._refuse(ask, check.problems, snapshot)
        approve = self._object(ask, snapshot)
        refuse_unstorable(approve, what=f"what approval {ask.kind!r} approves", kind="snapshot_not_storable")
        with transaction.atomic():  # the request and the run's wait commit together, or neither
            request = ApprovalRequest.objects.create(
                run_id=self.run_id, step=self.step, visit=self.visit, position=self.position, kind=ask.kind,
                ask=number, workflow_name=self.workflow_name,
                workflow_version=self.workflow_version, business_key=self.business_key, snapshot=snapshot,
                snapshot_hash=snapshot_hash(snapshot), approval_object=approve, object_hash=object_hash(approve),
                revalidate=revalidation_path(ask.revalidate), on_invalid=ask.on_invalid, on_expiry=ask.on_expiry,
                approvers_required=approvers_needed(self._approvers(ask, snapshot), check.approvers_required),
                expires_at=timezone.now() + ask.expires_in,
                last_check={"current": check.current, "problems": []},
            )
            self._wait(request, "asked" if number == 1 else "asked again")
            operator_event.send(Gate, kind=EventKind.APPROVAL_REQUESTED,
                                run_id=self.run_id, subject=request.id, detail=request.notice)
        raise AwaitingApproval(request.id)

    def _refuse(self, ask: ApprovalAsk, problems: tuple[str, ...], snapshot: dict[str, Any]) -> NoReturn:
        """The facts fail before anyone is asked: recorded, fenced, so a step that catches the refusal (a tool's
        answer) gets the same one when its visit runs again, whatever the facts are by then."""
        with transaction.atomic():
            self.store.fence(self.lease)
            self.store.journal(self.lease, JournalEntry.Kind.APPROVAL, self.step, detail={  # the visit: the lease's
                "event": PRECONDITION_FAILED, "position": self.position, "kind": ask.kind,
                "problems": list(problems), "snapshot_hash": snapshot_hash(snapshot)})
        raise ApprovalPreconditionFailed(ask.kind, problems)

    def _refused_before(self, ask: ApprovalAsk) -> None:
        """This visit's request at this place was refused on its facts before: the same refusal again."""
        recorded = (JournalEntry.objects.filter(run_id=self.run_id, kind=JournalEntry.Kind.APPROVAL, step=self.step,
                                                visit=self.visit, detail__event=PRECONDITION_FAILED,
                                                detail__position=self.position)
                    .values_list("detail", flat=True).first())
        if recorded is not None:
            raise ApprovalPreconditionFailed(ask.kind, tuple(recorded.get("problems") or ()))

    def _wait(self, request: ApprovalRequest, event: str) -> None:
        self.store.wait_for_approval(self.lease, self.step, {
            "event": event, "request": str(request.id), "kind": request.kind, "ask": request.ask,
            "snapshot_hash": request.snapshot_hash, "object_hash": request.object_hash,
            "expires_at": request.expires_at.isoformat(), "approvers_required": request.approvers_required,
        })

    def _invalidate(self, request: ApprovalRequest, current: dict[str, Any], problems: tuple[str, ...]) -> None:
        reason = "; ".join(problems)
        with transaction.atomic():
            self.store.fence(self.lease)
            ApprovalRequest.objects.filter(id=request.id, status=ApprovalStatus.APPROVED).update(
                status=ApprovalStatus.INVALIDATED, reason=reason,
                last_check={"current": current, "problems": list(problems)})
            self.store.journal(self.lease, JournalEntry.Kind.APPROVAL, self.step, detail={
                "event": "invalidated before acting", "request": str(request.id), "problems": list(problems),
                "current": current,
            })
        request.status, request.reason = ApprovalStatus.INVALIDATED, reason

    @staticmethod
    def _approvers(ask: ApprovalAsk, snapshot: dict[str, Any]) -> int:
        """Derived from the snapshot this very request shows, at every ask (the first and each one after)."""
        count = ask.approvers(snapshot) if callable(ask.approvers) else ask.approvers
        if count < 1:
            raise ValueError(f"the {ask.kind} approval's rule asked for {count} approvers; at least 1 is needed")
        return count

    @staticmethod
    def _object(ask: ApprovalAsk, snapshot: dict[str, Any]) -> dict[str, Any]:
        return ask.approve(snapshot) if callable(ask.approve) else ask.approve
