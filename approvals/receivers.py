"""What approvals does when the core says something happened (durable.signals), connected in ApprovalsConfig.ready()."""
from __future__ import annotations

from typing import Any

from approvals.services import close_for_run
from durable.models import Run


def close_requests_of_cancelled_run(sender: Any, *, run: Run, **_: Any) -> list[str]:
    """Closes the cancelled run's pending requests; says so for the cancel's answer."""
    invalidated = close_for_run(run, "the run was cancelled")
    if not invalidated:
        return []
    return [f"{invalidated} pending approval request{'s' if invalidated > 1 else ''}, now INVALIDATED"]
