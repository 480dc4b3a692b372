"""The tools' system check: fault injection is for drills, and a process without DEBUG refuses it."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from durable.tools.faults import armed


@register("durable")
def fault_injection_only_in_drills(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_fault_injection(debug=settings.DEBUG, points=armed())


def check_fault_injection(*, debug: bool, points: set[str]) -> list[CheckMessage]:
    """durable_tools.E001: no fault point is armed in a process that runs with DEBUG off."""
    if debug or not points:
        return []
    return [Error(
        f"Fault injection is armed (DURABLE_FAULT_POINTS={','.join(sorted(points))}) in a process with DEBUG off: "
        "a worker started from here would kill itself at those points.",
        hint="Unset DURABLE_FAULT_POINTS. The drill and the scale-out harness arm it only in the worker "
             "processes they start, never in the process that runs this command.",
        id="durable_tools.E001")]
