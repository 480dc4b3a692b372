"""The approvals app's launch check: every open request can still be revalidated by this code."""
from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register
from django.db import DatabaseError
from django.db.models import Count

from approvals.gate import load_revalidation
from approvals.models import ApprovalRequest
from durable.engine.approvals import ApprovalStatus
from durable.engine.states import TERMINAL


@register(Tags.database, "durable")
def revalidations_import(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not databases:
        return []
    return check_revalidations()


def check_revalidations() -> list[CheckMessage]:
    """durable.E013: the revalidation function of every open approval request imports."""
    try:
        # Approved requests are revalidated once more before the run acts: open while their run has not ended.
        open_requests = ApprovalRequest.objects.filter(status__in=(ApprovalStatus.PENDING, ApprovalStatus.APPROVED)).exclude(
            run__status__in=[s.value for s in TERMINAL])
        paths = list(open_requests.values("revalidate")
                     .annotate(n=Count("id")).values_list("revalidate", "n"))
    except DatabaseError:  # not migrated yet: nothing is open
        return []
    messages: list[CheckMessage] = []
    for path, count in sorted(paths):
        try:
            load_revalidation(path)
        except Exception as exc:  # ImportError, AttributeError, or the module's own error
            messages.append(Error(
                f"{count} open approval request(s) revalidate with {path}, which does not import here "
                f"({type(exc).__name__}: {exc}): they cannot be decided, nor acted on once approved",
                hint="Keep the function at that import path (a module-level function) until those requests "
                     "are decided or expired, or deploy the code that has it.",
                obj=path, id="durable.E013"))
    return messages
