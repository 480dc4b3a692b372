"""What approvals does when the core says something happened (durable.signals), connected in ApprovalsConfig.ready()."""
from __future__ import annotations

from typing import Any

from approvals.services import close_for_run
from durable.models import Run


def close_requests_of_cancelled_run(sender: Any, *, run: Run, **_: Any) -> None:
    close_for_run(run, "the run was cancelled")
