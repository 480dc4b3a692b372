"""Run statuses and the transitions between them: the run's state machine."""
from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    WAITING_RETRY = "WAITING_RETRY"
    WAITING = "WAITING"  # on a timer, an event from outside or child runs: `Run.waiting_for` says which
    NEEDS_ATTENTION = "NEEDS_ATTENTION"
    BLOCKED_VERSION = "BLOCKED_VERSION"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
# The run waits for something to happen (a person's decision, its retry time, a timer, an event, child runs): every
# screen, filter, count and metric of "waiting runs" reads this set, so a new kind of wait joins them all at once.
WAITING_STATES = frozenset({RunStatus.WAITING_APPROVAL, RunStatus.WAITING_RETRY, RunStatus.WAITING})
# An error put the run in these states; in any other its recorded error is history (the timeline keeps it).
ERROR_HELD = frozenset({RunStatus.WAITING_RETRY, RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION, RunStatus.FAILED})
# A worker may claim a run in these states (RUNNING only once its lease has expired).
CLAIMABLE = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING_RETRY})

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.PENDING,  # time slice ended, lease released
            RunStatus.RUNNING,  # lease expired, claimed again
            RunStatus.WAITING_APPROVAL,
            RunStatus.WAITING_RETRY,
            RunStatus.WAITING,
            RunStatus.NEEDS_ATTENTION,
            RunStatus.BLOCKED_VERSION,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.WAITING_APPROVAL: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.WAITING_RETRY: frozenset({RunStatus.RUNNING, RunStatus.PENDING, RunStatus.CANCELLED}),
    # Woken (PENDING) by its timer's due time on the database's clock, a matching event or its children's end.
    RunStatus.WAITING: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.NEEDS_ATTENTION: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.BLOCKED_VERSION: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.FAILED: frozenset({RunStatus.PENDING}),  # an operator's retry
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


def can_transition(current: RunStatus | str, target: RunStatus | str) -> bool:
    return RunStatus(target) in TRANSITIONS[RunStatus(current)]


def sources_of(target: RunStatus) -> frozenset[RunStatus]:
    """Every status from which `target` may be reached: the WHERE of a conditional UPDATE."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)
