"""Deciding approvals, expiring them, closing them: what the API, the console and the sweeper call.

Every state change is a conditional UPDATE on the request's status (and, for approvals, on
how many approvals it had when the decider read it): of two decisions made at once, one
lands and the other is told what happened. A final decision puts the run back in the queue
in the same transaction; its worker revalidates once more before acting.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils import timezone

from approvals.gate import load_revalidation
from approvals.models import ApprovalDecision, ApprovalRequest
from approvals.selectors import DECIDE_PERMISSION, newer_ask
from durable.audit import audit
from durable.conf import durable_settings
from durable.engine.approvals import (
    ApprovalStatus,
    DecisionRefused,
    Revalidation,
    Tally,
    Verdict,
    approvers_needed,
    check_decider,
)
from durable.engine.errors import classify
from durable.engine.notifications import EventKind
from durable.engine.states import RunStatus
from durable.errors import Conflict, Forbidden, InvalidInput, Unavailable
from durable.models import JournalEntry, Run, SecurityEvent
from durable.permissions import Caller, Person
from durable.runtime import transitions
from durable.scope import runs_in_scope
from durable.security import record_refusal
from durable.signals import operator_event

log = logging.getLogger("durable.approvals")


def revalidate(request: ApprovalRequest) -> Revalidation:
    """Re-read the business preconditions now; Unavailable when the downstream does not answer."""
    try:
        return load_revalidation(request.revalidate)(request.snapshot)
    except Exception as exc:  # any failure to read means we cannot know; decide nothing
        verdict = classify(exc)
        raise Unavailable(f"could not re-read the facts behind this request ({verdict.message}); "
                          "nothing was decided, try again") from exc


def decide(*, request_id: UUID | str, user: Person, verdict: Verdict | str, snapshot_hash: str,
           reason: str = "", source: str, http_request: HttpRequest | None = None) -> ApprovalRequest:
    """Approve or reject `request_id` as `user`, who saw the snapshot with `snapshot_hash`.

    Every refused decision is written to the security log here, whoever calls: stale, late or already made
    (Conflict, 409, kind decision_refused) and forbidden (the role missing, the run's starter: 403, kind forbidden,
    so RefusalLogMiddleware does not write it again).
    """
    try:
        return _decide(request_id, user, Verdict(verdict), snapshot_hash, reason, source)
    except (Conflict, Forbidden) as exc:
        forbidden = isinstance(exc, Forbidden)
        record_refusal(kind=SecurityEvent.Kind.FORBIDDEN if forbidden else SecurityEvent.Kind.DECISION_REFUSED,
                       source=source, reason=str(exc), request=http_request, user=user, action=Verdict(verdict).value,
                       target=http_request.path if forbidden and http_request is not None else request_id)
        raise


def _decide(request_id: UUID | str, user: Person, verdict: Verdict, snapshot_hash: str, reason: str,
            source: str) -> ApprovalRequest:
    request = ApprovalRequest.objects.select_related("run").get(id=request_id)
    if not user.has_perm(DECIDE_PERMISSION):
        raise Forbidden("you need the approver role to decide approvals")
    _check_not_starter(request, user, verdict)
    if verdict == Verdict.REJECT and not reason.strip():
        raise InvalidInput({"reason": ["A rejection needs a reason."]})
    _check_still_open(request)
    if snapshot_hash != request.snapshot_hash:
        raise Conflict("you decided on a snapshot that is not this request's; reload and look again",
                       current=request.status, **_newer(request))
    check = revalidate(request)
    if not check.holds:
        invalidate(request, check, user=user, source=source)
        raise Conflict(f"the facts changed since the request was made: {'; '.join(check.problems)}. "
                       "The approval was invalidated and nothing was approved", current=ApprovalStatus.INVALIDATED,
                       **_newer(request, check))
    with _one_decision(request):
        return _record(request, user, verdict, snapshot_hash, reason.strip(), check, source)


def _record(request: ApprovalRequest, user: Person, verdict: Verdict, seen_hash: str, reason: str,
            check: Revalidation, source: str) -> ApprovalRequest:
    approvers = frozenset(request.decisions.filter(verdict=Verdict.APPROVE).values_list("user__username", flat=True))
    required = approvers_needed(request.approvers_required, check.approvers_required)
    tally = Tally(required, approvers)
    starter = request.run.created_by.get_username() if request.run.created_by else None
    try:
        check_decider(user=user.get_username(), run_starter=starter, tally=tally, verdict=verdict)
    except DecisionRefused as exc:
        if exc.code == "self_approval":
            raise Forbidden(str(exc)) from None
        raise Conflict(str(exc), current=request.status) from None
    target = tally.outcome_of(verdict)
    counted = int(verdict == Verdict.APPROVE)
    now = timezone.now()
    with transaction.atomic():
        final = {"decided_at": now, "decided_by": user, "reason": reason} if target != ApprovalStatus.PENDING else {}
        # The database's clock judges the deadline, in the statement that records the decision: nothing is
        # approved at or after expires_at, whatever the sweeper has (not yet) done (invariant 10).
        moved = ApprovalRequest.objects.filter(
            id=request.id, status=ApprovalStatus.PENDING, approvals_count=request.approvals_count,
            expires_at__gt=Now(),
        ).update(status=target, approvals_count=F("approvals_count") + counted, approvers_required=required,
                 last_check={"current": check.current, "problems": []}, **final)
        if moved:
            ApprovalDecision.objects.create(request=request, user=user, verdict=verdict, reason=reason,
                                            snapshot_hash=seen_hash)
            detail = {"request": str(request.id), "kind": request.kind, "verdict": verdict.value,
                      "snapshot_hash": seen_hash, "object_hash": request.object_hash,
                      "approvals": request.approvals_count + counted,
                      "approvers_required": required, "status": target.value}
            audit(user=user, action=verdict.value, run=request.run, source=source, status_before=ApprovalStatus.PENDING,
                  status_after=target, reason=reason, detail=detail)
            _journal(request, {"event": f"{verdict.past_tense} by {user.get_username()}", **detail})
            if target != ApprovalStatus.PENDING:
                _wake(request.run_id)
    if not moved:  # raised outside the atomic block, so that expiring the request on the way is kept
        raise _refused_write(request)
    request.refresh_from_db()
    return request


@contextmanager
def _one_decision(request: ApprovalRequest) -> Iterator[None]:
    """Turn the one-decision-per-person constraint into an answer, not a 500."""
    try:
        yield
    except IntegrityError:
        raise Conflict("you have already decided this request", current=_status_now(request)) from None


def _check_not_starter(request: ApprovalRequest, user: Person, verdict: Verdict) -> None:
    """Separation of duties before anything else: the run's starter is refused before the facts are re-read,
    so their attempt cannot even invalidate the request (and be audited as theirs)."""
    starter = request.run.created_by.get_username() if request.run.created_by else None
    try:
        check_decider(user=user.get_username(), run_starter=starter, tally=Tally(request.approvers_required),
                      verdict=verdict)
    except DecisionRefused as exc:
        raise Forbidden(str(exc)) from None


def why_not_decide(request: ApprovalRequest, user: Person) -> str:
    """Why `user` may not decide this open request now, in words; empty when they may.

    The console offers Approve and Reject only when this is empty; decide() refuses by the same rules.
    """
    if not user.has_perm(DECIDE_PERMISSION):
        return "you need the approver role to decide approvals"
    try:
        _check_not_starter(request, user, Verdict.APPROVE)
    except Forbidden as exc:
        return f"{exc}: another approver must decide it"
    if request.decisions.filter(user_id=user.pk).exists():  # a reject would have closed it: this is an approval
        return (f"you approved it; it waits for another approver ({request.approvals_count} of "
                f"{request.approvers_required} approvals)")
    return ""


def _check_still_open(request: ApprovalRequest) -> None:
    if request.status != ApprovalStatus.PENDING:
        raise Conflict(_what_happened(request), current=request.status, **_newer(request))
    if expire(request.id):  # past its deadline, swept or not: refused before the facts are even re-read
        raise Conflict(_what_happened(ApprovalRequest.objects.get(id=request.id)), current=ApprovalStatus.EXPIRED,
                       **_newer(request))
    if request.run.status != RunStatus.WAITING_APPROVAL:
        raise Conflict(f"the run is {request.run.status}; there is nothing to decide", current=request.status)


def _refused_write(request: ApprovalRequest) -> Conflict:
    """Why the decision's UPDATE matched nothing: the deadline passed, or someone decided first."""
    if expire(request.id):
        return Conflict(_what_happened(ApprovalRequest.objects.get(id=request.id)), current=ApprovalStatus.EXPIRED,
                        **_newer(request))
    return _lost_race(request)


def _lost_race(request: ApprovalRequest) -> Conflict:
    fresh = ApprovalRequest.objects.select_related("decided_by").get(id=request.id)
    if fresh.status == ApprovalStatus.PENDING:
        message = (f"another approver decided meanwhile ({fresh.approvals_count} of {fresh.approvers_required} "
                   "approvals now); look again and decide")
        return Conflict(message, current=fresh.status)
    return Conflict(_what_happened(fresh), current=fresh.status, **_newer(fresh))


def _what_happened(request: ApprovalRequest) -> str:
    who = request.decided_by.get_username() if request.decided_by else "the system"
    when = request.decided_at.isoformat(timespec="seconds") if request.decided_at else ""
    status = ApprovalStatus(request.status)
    if status == ApprovalStatus.EXPIRED:
        return f"this request expired at {request.expires_at.isoformat(timespec='seconds')}; nothing was decided"
    if status == ApprovalStatus.INVALIDATED:
        return f"this request was invalidated ({request.reason}); nothing was decided"
    return f"this request was already {status.lower()} by {who} at {when}"


def _newer(request: ApprovalRequest, check: Revalidation | None = None) -> dict[str, Any]:
    """What to show instead: the current values, and the request that replaced this one, if any."""
    newer = newer_ask(request)
    extra: dict[str, Any] = {}
    if check is not None:
        extra["current_values"] = check.current
    if newer is not None:
        extra["newer_request"] = {"id": str(newer.id), "snapshot": newer.snapshot,
                                  "snapshot_hash": newer.snapshot_hash}
    return extra


def _status_now(request: ApprovalRequest) -> str:
    return ApprovalRequest.objects.values_list("status", flat=True).get(id=request.id)


def invalidate(request: ApprovalRequest, check: Revalidation, *, user: Caller | None, source: str) -> bool:
    """The facts moved under a pending request: invalidate it and wake the run to take its path."""
    reason = "; ".join(check.problems)
    with transaction.atomic():
        moved = ApprovalRequest.objects.filter(id=request.id, status=ApprovalStatus.PENDING).update(
            status=ApprovalStatus.INVALIDATED, decided_at=timezone.now(), reason=reason,
            last_check={"current": check.current, "problems": list(check.problems)})
        if not moved:
            return False
        detail = {"request": str(request.id), "kind": request.kind, "problems": list(check.problems),
                  "current": check.current, "path": request.on_invalid}
        audit(user=user, action="invalidate_approval", run=request.run, source=source,
              status_before=ApprovalStatus.PENDING, status_after=ApprovalStatus.INVALIDATED, reason=reason,
              detail=detail)
        _journal(request, {"event": "invalidated", **detail})
        _wake(request.run_id)
    return True


def expire_due(limit: int = 500) -> list[UUID]:
    """Expire pending requests past their deadline; each run wakes to take its expiry path."""
    due = list(ApprovalRequest.objects.filter(runs_in_scope("run__"), status=ApprovalStatus.PENDING,
                                              expires_at__lte=Now())
               .order_by("expires_at").values_list("id", flat=True)[:limit])
    return [request_id for request_id in due if expire(request_id)]


def expire(request_id: UUID) -> bool:
    """Expire one pending request whose deadline has passed by the database's clock, and wake its run to take
    the expiry path: the sweeper's way and a late decider's way are this one. False if it was not due or not
    pending any more."""
    with transaction.atomic():
        moved = ApprovalRequest.objects.filter(id=request_id, status=ApprovalStatus.PENDING,
                                               expires_at__lte=Now()).update(
            status=ApprovalStatus.EXPIRED, decided_at=Now(), reason="no decision before it expired")
        if not moved:
            return False
        request = ApprovalRequest.objects.get(id=request_id)
        _journal_at(request.run_id, request.step, {"event": "expired", "request": str(request_id),
                                                   "kind": request.kind, "path": request.on_expiry},
                    at=request.decided_at or timezone.now())  # the update above set it
        operator_event.send(expire, kind=EventKind.APPROVAL_EXPIRED,
                            run_id=request.run_id, subject=request_id, detail=request.notice)
        _wake(request.run_id)
    return True


def sweep_approvals() -> int:
    """The sweeper's beat for approvals (registered from ApprovalsConfig.ready()): expire what is due, warn of
    what is about to; returns how many expired."""
    expired = expire_due()
    warn_expiring()
    return len(expired)


def warn_expiring(limit: int = 500) -> int:
    """The sweeper's warning of pending requests within DURABLE_NOTIFY_EXPIRY_WARNING_SECONDS of expiring.

    Sent at every sweep while a request is in that hour; the outbox keeps one event per request (its key).
    """
    lead = timedelta(seconds=durable_settings.DURABLE_NOTIFY_EXPIRY_WARNING_SECONDS)
    soon = list(ApprovalRequest.objects.filter(runs_in_scope("run__"), status=ApprovalStatus.PENDING,
                                               expires_at__gt=Now(), expires_at__lte=timezone.now() + lead)
                .order_by("expires_at")[:limit])
    for request in soon:
        with transaction.atomic():
            operator_event.send(warn_expiring, kind=EventKind.APPROVAL_EXPIRING, run_id=request.run_id,
                                subject=request.id, detail=request.notice)
    return len(soon)


def close_for_run(run: Run, why: str) -> int:
    """The run ended without the answer (cancelled): its open requests can no longer be decided."""
    return ApprovalRequest.objects.filter(run_id=run.id, status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.INVALIDATED, decided_at=timezone.now(), reason=why)


def _journal(request: ApprovalRequest, detail: dict[str, Any]) -> None:
    _journal_at(request.run_id, request.step, detail, at=timezone.now())


def _journal_at(run_id: UUID, step: str, detail: dict[str, Any], *, at: datetime) -> None:
    JournalEntry.objects.create(run_id=run_id, kind=JournalEntry.Kind.APPROVAL, step=step, detail=detail, created_at=at)


def _wake(run_id: UUID) -> None:
    """WAITING_APPROVAL -> PENDING and enqueue after commit; the worker takes it from there."""
    transitions.move(run_id, RunStatus.PENDING, sources={RunStatus.WAITING_APPROVAL}, enqueued_at=timezone.now())
