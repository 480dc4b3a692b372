"""Queries the API and the console share: one place for what the inbox filters mean."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Count, Max, Min, Prefetch, Q, QuerySet, Sum, prefetch_related_objects
from django.utils import timezone

from approvals.models import ApprovalDecision, ApprovalRequest
from durable.engine.approvals import ApprovalStatus
from durable.models import Run
from durable.permissions import Person

LOOKUPS = {"status": "status", "kind": "kind", "workflow": "workflow_name", "version": "workflow_version",
           "business_key": "business_key", "run": "run_id"}


def filter_requests(queryset: QuerySet[ApprovalRequest], filters: dict[str, Any]) -> QuerySet[ApprovalRequest]:
    """Validated filters applied; PENDING unless a status is asked for (the inbox)."""
    filters = {"status": ApprovalStatus.PENDING, **{k: v for k, v in filters.items() if v not in (None, "")}}
    return queryset.filter(**{LOOKUPS[k]: v for k, v in filters.items()})


def pending_count() -> int:
    return ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count()


@dataclass(frozen=True)
class PendingSummary:
    """How many requests wait for a human, since when, and the soonest expiry: one aggregate."""

    count: int
    oldest_created_at: datetime | None
    soonest_expiry: datetime | None


def pending_summary() -> PendingSummary:
    found = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).aggregate(
        count=Count("*"), oldest=Min("created_at"), soonest=Min("expires_at"))
    return PendingSummary(found["count"], found["oldest"], found["soonest"])


def stuck_count(*, older_than: datetime, expiring_before: datetime) -> int:
    """Pending requests asked before `older_than` or expiring before `expiring_before`."""
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    return pending.filter(Q(created_at__lt=older_than) | Q(expires_at__lt=expiring_before)).count()


DECIDE_PERMISSION = "approvals.decide_approvalrequest"
EXPIRING_WITHIN = timedelta(hours=1)


@dataclass(frozen=True)
class Tab:
    """One view of the inbox as a work queue: which requests it holds, for one user."""

    name: str
    label: str
    holds: Any  # (user, now) -> Q over ApprovalRequest


# Both are `IN (subquery)` over the user's own few rows, read once through their indexes: a join to durable_run or
# an EXISTS per pending request costs a pass over every run (200 ms at a million runs, docs/benchmarks-log.md).
def _decided_by(user: Person) -> Q:
    return Q(id__in=ApprovalDecision.objects.filter(user_id=user.pk).values("request_id"))


def _started_by(user: Person) -> Q:
    return Q(run_id__in=Run.objects.filter(created_by_id=user.pk).values("id"))


def _needs(user: Person, now: datetime) -> Q:
    """Requests this user may decide and has not: not their own run's, none they already approved."""
    if not user.has_perm(DECIDE_PERMISSION):
        return Q(pk__in=[])
    return ~_started_by(user) & ~_decided_by(user)


TABS = {tab.name: tab for tab in (
    Tab("needs_me", "Needs me", _needs),
    Tab("approved_by_me", "I approved, waiting for a second approver", lambda user, now: _decided_by(user)),
    Tab("started_by_me", "Started by me (I cannot approve)", lambda user, now: _started_by(user)),
    Tab("expiring", "Expiring within 1 h", lambda user, now: Q(expires_at__lt=now + EXPIRING_WITHIN)),
    Tab("all", "All", lambda user, now: Q()),
)}
DEFAULT_TAB = "all"


def tab_counts(user: Person, filters: dict[str, Any]) -> dict[str, int]:
    """How many requests each tab holds for `user` under the filters: one aggregate."""
    now = timezone.now()
    queryset = filter_requests(ApprovalRequest.objects.all(), filters)
    return queryset.aggregate(**{name: Count("id", filter=tab.holds(user, now)) for name, tab in TABS.items()})


def inbox_state(user: Person, filters: dict[str, Any]) -> Any:
    """What a live inbox's version reads: the tabs' counts and the requests' newest change."""
    changed = filter_requests(ApprovalRequest.objects.all(), filters).aggregate(
        created=Max("created_at"), approvals=Sum("approvals_count"))
    return tab_counts(user, filters), changed


def inbox_page(filters: dict[str, Any], after: tuple[datetime, UUID] | None, size: int, *,
               tab: str = DEFAULT_TAB, user: Person | None = None) -> list[ApprovalRequest]:
    """Up to `size` + 1 pending requests of `tab` for `user` after the page marker, soonest expiry first (the
    partial index's order).

    The extra row only tells the caller there is another page.
    """
    queryset = filter_requests(ApprovalRequest.objects.all(), filters)
    if user is not None:
        queryset = queryset.filter(TABS[tab].holds(user, timezone.now()))
    if after is not None:
        expires_at, request_id = after
        queryset = queryset.filter(Q(expires_at__gt=expires_at) | Q(expires_at=expires_at, id__gt=request_id))
    listed = queryset.order_by("expires_at", "id").defer("snapshot", "last_check")  # the rows show neither
    return list(listed[:size + 1])


PARENT_SHOWN = ("id", "parent_run", "parent_run__id", "parent_run__workflow_name", "parent_run__workflow_version",
                "parent_run__business_key", "parent_run__status")


def with_parent_runs(requests: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """Each request's run as `run_with_parent`, with the run whose step started it (ctx.start_child) if any:
    one query for the page, by the runs' primary keys."""
    prefetch_related_objects(requests, Prefetch("run", queryset=Run.objects.select_related("parent_run")
                                                .only(*PARENT_SHOWN), to_attr="run_with_parent"))
    return requests


def newer_ask(request: ApprovalRequest) -> ApprovalRequest | None:
    """The request that replaced this one when the run asked again, if it did."""
    return (_same_place(request).filter(ask__gt=request.ask).order_by("-ask").first())


def earlier_ask(request: ApprovalRequest) -> ApprovalRequest | None:
    """The request this one replaced: the run's previous ask at the same place (refused, expired or invalidated)."""
    return (_same_place(request).filter(ask__lt=request.ask).order_by("-ask").first())


def _same_place(request: ApprovalRequest) -> Any:
    """The requests asked at this one's place: its run, step, visit and position in the visit."""
    return ApprovalRequest.objects.filter(run_id=request.run_id, step=request.step, visit=request.visit,
                                          position=request.position)


def request_state(request_id: UUID) -> Any:
    """What a live approval page's version reads: the request's decision columns, its run's status, and whether
    the run asked again."""
    found = ApprovalRequest.objects.filter(id=request_id).annotate(
        asks=Max("run__approvals__ask"), decided=Count("decisions", distinct=True))
    return found.values_list("status", "approvals_count", "approvers_required", "decided_at", "run__status",
                             "asks", "decided").first()
