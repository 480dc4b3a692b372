"""The approvals' section of the console overview (added from ApprovalsConfig.ready()): requests waiting for
people now, and decisions over the last day with their median wait.

Decisions are read from their index range (`approval_decided`), as the core's numbers are.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors import stuck_count
from durable.conf import durable_settings
from durable.console.overview import Hourly, Section, hourly
from durable.engine.approvals import ApprovalStatus

DECIDED = [ApprovalStatus.APPROVED, ApprovalStatus.REJECTED]  # by people; expiry and invalidation are not decisions
NEAR_EXPIRY = timedelta(hours=1)  # as the DurableApprovalNearExpiry alert (deploy/prometheus/durable-alerts.yml)


@dataclass(frozen=True)
class ApprovalsOverview:
    pending: int
    oldest: ApprovalRequest | None  # the pending request asked longest ago
    stuck: int  # pending over DURABLE_STUCK_APPROVAL_HOURS, or expiring within NEAR_EXPIRY
    stuck_hours: float
    decided: Hourly  # approved or rejected since the window's start
    median_wait: timedelta | None  # from asking to deciding, over the decisions counted


def read(since: datetime) -> ApprovalsOverview:
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    now = timezone.now()
    stuck_hours = durable_settings.DURABLE_STUCK_APPROVAL_HOURS
    decided = ApprovalRequest.objects.filter(decided_at__gte=since, status__in=DECIDED)
    return ApprovalsOverview(
        pending=pending.count(),
        oldest=pending.order_by("created_at", "id").only("id", "kind", "business_key", "created_at", "status",
                                                         "decided_at").first(),
        stuck=stuck_count(older_than=now - timedelta(hours=stuck_hours), expiring_before=now + NEAR_EXPIRY),
        stuck_hours=stuck_hours,
        decided=Hourly("approvals decided", hourly(decided, "decided_at", since)),
        median_wait=_median_wait(decided),
    )


def _median_wait(decided: QuerySet[ApprovalRequest]) -> timedelta | None:
    # People decide a few hundred requests a day, not millions: their waits are read and sorted here.
    waits = [decided_at - created_at for created_at, decided_at in decided.values_list("created_at", "decided_at")
             if decided_at is not None]  # a decided request always has its time
    return statistics.median(waits) if waits else None  # type: ignore[type-var]  # it sorts and halves timedeltas too


def badge_count(found: ApprovalsOverview) -> dict[str, Any]:
    # The navigation badge shows the same count: the page counts once, not twice.
    return {"pending_approvals": found.pending}


SECTION = Section(read=read, now_template="approvals/_overview_now.html",
                  last_day_template="approvals/_overview_last_day.html", context=badge_count)
