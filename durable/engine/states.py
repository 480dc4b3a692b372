"""Run statuses and the transitions between them: the run's state machine."""
from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from durable.engine.errors import DurableError


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
    PAUSED = "PAUSED"  # an operator paused it (or its workflow's kill switch): nothing runs until it is resumed


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
# The run waits for something to happen (a person's decision, its retry time, a timer, an event, child runs): every
# screen, filter, count and metric of "waiting runs" reads this set, so a new kind of wait joins them all at once.
WAITING_STATES = frozenset({RunStatus.WAITING_APPROVAL, RunStatus.WAITING_RETRY, RunStatus.WAITING})
# An error put the run in these states; in any other its recorded error is history (the timeline keeps it).
ERROR_HELD = frozenset({RunStatus.WAITING_RETRY, RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION, RunStatus.FAILED})
# Where an operator's pause moves a run at once; a RUNNING run is asked to pause (`Run.pause_requested_at`) and its
# worker moves it at its next step boundary; a run held for an operator (NEEDS_ATTENTION, BLOCKED_VERSION) keeps the
# request and pauses when it is released (durable/runtime/pausing.py).
PAUSABLE_AT_ONCE = frozenset({RunStatus.PENDING, RunStatus.WAITING_RETRY, RunStatus.WAITING, RunStatus.WAITING_APPROVAL})
# A worker may claim a run in these states (RUNNING only once its lease has expired).
CLAIMABLE = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING_RETRY})

# Every move a run's status may make, and who makes it (docs/operations.md, "The state table and its one door").
# The worker makes the moves out of RUNNING under its lease (durable/store/); every other move is
# durable/runtime/transitions.py's. A move not in this table is refused with IllegalTransition.
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.PENDING: frozenset(
        {
            RunStatus.RUNNING,  # claimed by a worker
            RunStatus.NEEDS_ATTENTION,  # the sweeper's reconciler found an operation UNKNOWN while no worker held it
            RunStatus.CANCELLED,
            RunStatus.PAUSED,  # an operator's pause, or a start held by its workflow's kill switch
        }
    ),
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
            RunStatus.PAUSED,  # its worker saw a pause asked for, at a step boundary or when it claimed it
        }
    ),
    # Woken (PENDING) by a decision, an expiry or an invalidation of its request.
    RunStatus.WAITING_APPROVAL: frozenset({RunStatus.PENDING, RunStatus.CANCELLED, RunStatus.PAUSED}),
    # Claimed when due (RUNNING), sent now by an operator's retry (PENDING), or held by the sweeper's reconciler.
    RunStatus.WAITING_RETRY: frozenset(
        {RunStatus.RUNNING, RunStatus.PENDING, RunStatus.NEEDS_ATTENTION, RunStatus.CANCELLED, RunStatus.PAUSED}
    ),
    # Woken (PENDING) by its timer's due time on the database's clock, a matching event or its children's end.
    RunStatus.WAITING: frozenset({RunStatus.PENDING, RunStatus.CANCELLED, RunStatus.PAUSED}),
    # Goes on (PENDING) once its last UNKNOWN operation is resolved, or its budget is raised.
    RunStatus.NEEDS_ATTENTION: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    # Resumed (its version deployed again) or migrated by an operator: PENDING.
    RunStatus.BLOCKED_VERSION: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.FAILED: frozenset({RunStatus.PENDING}),  # an operator's retry
    # Resumed (PENDING: the visit it stopped in runs again from its checkpoint, taking up what it waited on, reusing
    # what it recorded), or cancelled. Parked: no timer, event or decision wakes it meanwhile.
    RunStatus.PAUSED: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


class IllegalTransition(DurableError):
    """A move the state table does not allow (docs/operations.md, "The state table and its one door"): a mistake
    in the code that asked for it, never a race lost (a run that changed meanwhile is the caller's conflict)."""

    def __init__(self, current: RunStatus | str, target: RunStatus | str) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[RunStatus(current)])) or "nothing: it has ended"
        super().__init__(f"a run that is {current} cannot move to {target}; the state table allows {allowed}")
        self.current = RunStatus(current)
        self.target = RunStatus(target)


def can_transition(current: RunStatus | str, target: RunStatus | str) -> bool:
    return RunStatus(target) in TRANSITIONS[RunStatus(current)]


def check_transition(current: RunStatus | str, target: RunStatus | str) -> None:
    """IllegalTransition unless the table allows `current` -> `target`."""
    if not can_transition(current, target):
        raise IllegalTransition(current, target)


def sources_of(target: RunStatus) -> frozenset[RunStatus]:
    """Every status from which `target` may be reached: the WHERE of a conditional UPDATE."""
    return frozenset(s for s, targets in TRANSITIONS.items() if target in targets)


def checked_sources(target: RunStatus, sources: Iterable[RunStatus | str] | None = None) -> frozenset[RunStatus]:
    """The statuses a move to `target` may leave: `sources`, each checked against the table (IllegalTransition for
    one it forbids), or every one the table allows."""
    if sources is None:
        return sources_of(target)
    chosen = frozenset(RunStatus(source) for source in sources)
    for source in chosen:
        check_transition(source, target)
    return chosen
