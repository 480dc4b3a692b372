"""The approvals' part of a run's page (durable/console/run_page.py), added from ApprovalsConfig.ready(): the
run's requests, and each one's status now beside the timeline's approval events."""
from __future__ import annotations

from django.db.models import QuerySet

from approvals.models import ApprovalRequest
from durable.console.run_page import RunSection
from durable.models import Run


def requests_of(run: Run) -> QuerySet[ApprovalRequest]:
    return ApprovalRequest.objects.filter(run=run).order_by("created_at", "ask")


def statuses_of(run: Run) -> dict[str, str]:
    return {str(pk): status for pk, status in ApprovalRequest.objects.filter(run=run).values_list("id", "status")}


SECTION = RunSection("approvals/_run_section.html", read=requests_of, statuses=statuses_of)
