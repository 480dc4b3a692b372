"""Crashes a test arms at a fault point (durable/runtime/fault_points.py): the worker 'dies' there, once."""
from __future__ import annotations

from dataclasses import dataclass, field

from durable.runtime import fault_points


class WorkerCrashed(BaseException):
    """Escapes the executor as a SIGKILL would: nothing after the fault point runs, nothing is cleaned up.

    A BaseException, like the signal it stands for, so no `except Exception` in a step or in durable catches it."""


@dataclass
class Crash:
    """A crash armed at `point` (for the action `action`, or any): `fired` names the operation it hit."""

    point: str
    action: str | None = None
    fired: str | None = field(default=None, init=False)

    def matches(self, point: str, action: str) -> bool:
        return self.fired is None and point == self.point and self.action in (None, action)


_armed: list[Crash] = []


def arm(point: str, action: str | None = None) -> Crash:
    """The next time a worker of this process reaches `point` (of `action`), it crashes there."""
    known = (*fault_points.FAULT_POINTS, *fault_points.WAIT_FAULT_POINTS)
    if point not in known:
        raise ValueError(f"no fault point {point!r}; the fault points are {', '.join(known)}")
    fault_points.add_hook(_crash_if_armed)  # added once per process; a no-op while nothing is armed
    crash = Crash(point, action)
    _armed.append(crash)
    return crash


def disarm_all() -> None:
    _armed.clear()


def _crash_if_armed(point: str, *, operation_id: str, action: str) -> None:
    for crash in _armed:
        if crash.matches(point, action):
            crash.fired = operation_id
            _armed.remove(crash)
            raise WorkerCrashed(f"the worker was killed at {point} of {action} ({operation_id})")
