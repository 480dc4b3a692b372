"""The side-effect boundary's phase points, and the waits', where a tool may act as a crash would (the fault drill).

Production code calls `fault_point` at each phase boundary of a side-effecting call, and where a wait's
outcome is committed but the step is not yet checkpointed (durable.runtime.waits, wakes); it does
nothing unless a tool added a hook (durable.tools.faults does, in the tools app's ready()).
The runtime never imports the tools: they register with it.
"""
from __future__ import annotations

from collections.abc import Callable

AFTER_PREPARE = "after_prepare"
AFTER_STARTED = "after_started"
AFTER_DOWNSTREAM = "after_downstream"  # answered, not yet committed: the classic window
AFTER_COMMIT = "after_commit"  # committed, step not yet checkpointed
FAULT_POINTS = (AFTER_PREPARE, AFTER_STARTED, AFTER_DOWNSTREAM, AFTER_COMMIT)

# The waits' points (invariants 18 and 19), drilled by durable.tools.drill_waits; the side-effect drill and the
# launch check (durable.W011) know only FAULT_POINTS.
AFTER_EVENT_CONSUMED = "after_event_consumed"  # taken from the mailbox and recorded, step not checkpointed
AFTER_CHILD_STARTED = "after_child_started"  # the child run exists, the parent's record of it does not
AFTER_CHILD_FINISHED = "after_child_finished"  # the child's end committed, its parent not woken yet
AFTER_CHILDREN_ENDED = "after_children_ended"  # how the children ended recorded in the parent, not checkpointed
WAIT_FAULT_POINTS = (AFTER_EVENT_CONSUMED, AFTER_CHILD_STARTED, AFTER_CHILD_FINISHED, AFTER_CHILDREN_ENDED)

Hook = Callable[..., None]  # hook(point, *, operation_id, action)
_hooks: list[Hook] = []


def add_hook(hook: Hook) -> None:
    """Call `hook` at every fault point from now on (once, however often it is added)."""
    if hook not in _hooks:
        _hooks.append(hook)


def fault_point(point: str, *, operation_id: str, action: str) -> None:
    """A side-effecting call reached `point` of operation `operation_id` (action `action`)."""
    for hook in _hooks:
        hook(point, operation_id=operation_id, action=action)
