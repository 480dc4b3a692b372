"""What a parked run shows (docs/console.md, "Waiting runs"): what it waits for and the time left, the runs it
waits on with their statuses, its mailbox of events, and its parent and children.

Read from the run's row and a few index reads (the children by `parent_run`, the mailbox by `run_event_mailbox`),
never the run's contents: whoever may see the run sees what it waits for. An event's payload is contents: it is
shown only under the contents rule (durable.permissions.can_see_contents).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.utils import timezone

from durable.console.timeline import visit_label, visit_names
from durable.engine.states import TERMINAL, RunStatus
from durable.engine.waits import WaitingFor, WaitKind
from durable.models import Checkpoint, Run, RunEvent
from durable.templatetags.console_time import duration

LINKED = ("id", "workflow_name", "workflow_version", "business_key", "status", "created_at")
CHILDREN_SHOWN = 50
MAILBOX_SHOWN = 50


@dataclass(frozen=True)
class RunLink:
    """Another run named on this run's page: its parent, a child."""

    id: UUID
    workflow_name: str
    workflow_version: int
    business_key: str
    status: str

    @classmethod
    def of(cls, run: Run) -> RunLink:
        return cls(run.id, run.workflow_name, run.workflow_version, run.business_key, run.status)


@dataclass(frozen=True)
class Wait:
    """What a WAITING run waits for, with its due time and the time left as of `now`."""

    kind: WaitKind
    step: str
    visit: str  # "listen #2" where the step was visited more than once, else ""
    until: datetime | None  # when the timer fires, or the event wait's deadline passes; None: no due time
    left: timedelta | None  # until `until`; negative once it has passed
    events: tuple[str, ...] = ()
    children: tuple[RunLink, ...] = ()
    headline: str = ""  # what it waits for, in one phrase: "a timer", "event 'reply' or 'declined'", "2 child runs to end"
    limit: str = ""  # a limit wait's limit, and the key its calls count under
    limit_key: str = ""

    @property
    def overdue(self) -> bool:
        """Due, and not woken yet: the next sweep wakes it (the DurableWaitOverdue alert, if none does)."""
        return self.left is not None and self.left <= timedelta(0)

    @property
    def late(self) -> timedelta:
        """How long ago it fell due (zero while it is not due)."""
        return max(-self.left, timedelta(0)) if self.left is not None else timedelta(0)

    @property
    def ended_children(self) -> int:
        return sum(1 for child in self.children if child.status in TERMINAL)


def waiting_for(run: Run) -> WaitingFor | None:
    """The wait the run is parked on; None unless it is WAITING with a readable description."""
    if run.status != RunStatus.WAITING or not isinstance(run.waiting_for, dict):
        return None
    try:
        return WaitingFor.from_json(run.waiting_for)
    except (KeyError, TypeError, ValueError):  # written by a newer or broken version: the status still says WAITING
        return None


def due_time(run: Run, waiting: WaitingFor) -> datetime | None:
    # next_attempt_at is the time the sweeper wakes it by; the description keeps a copy.
    return run.next_attempt_at or waiting.until


def wait_of(run: Run, visits: dict[int, str] | None = None) -> Wait | None:
    """The run's wait as its page shows it: the children it waits on read in one query, in the order waited."""
    waiting = waiting_for(run)
    if waiting is None:
        return None
    until = due_time(run, waiting)
    found = {str(child.id): RunLink.of(child) for child in
             Run.objects.filter(id__in=waiting.children).only(*LINKED)} if waiting.children else {}
    return Wait(waiting.kind, waiting.step, visit_label(visits or {}, waiting.visit), until,
                until - timezone.now() if until is not None else None, waiting.events,
                tuple(found[child] for child in waiting.children if child in found), waiting.describe(deadline=False),
                waiting.limit, waiting.limit_key)


def summary(run: Run, now: datetime) -> str:
    """One line for the runs list's row of a WAITING run: "timer, 2 h 5 min left"; "" for any other run."""
    waiting = waiting_for(run)
    if waiting is None:
        return ""
    until = due_time(run, waiting)
    if waiting.kind == WaitKind.CHILD:
        count = len(waiting.children)
        return f"{count} child run{'s' if count != 1 else ''}"
    if waiting.kind == WaitKind.LIMIT:
        return f"limit {waiting.limit}" + (f" for {waiting.limit_key}" if waiting.limit_key else "")
    what = "timer" if waiting.kind == WaitKind.TIMER else "event " + " or ".join(waiting.events)
    if until is None:
        return f"{what}, no deadline"
    left = until - now
    return f"{what}, {duration(left)} left" if left > timedelta(0) else f"{what}, due {duration(-left)} ago"


def visits_of(run: Run) -> dict[int, str]:
    """The run's visits by the seq of the checkpoint each started from (durable.console.timeline.visit_names)."""
    return visit_names(list(Checkpoint.objects.filter(run_id=run.id).only("seq", "step", "next_step")))


# -- Parent and children -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    parent: RunLink | None
    children: tuple[RunLink, ...]  # the first CHILDREN_SHOWN, oldest first
    more_children: int
    forked_from: RunLink | None = None  # the run it was forked from (durable/forks.py), at checkpoint forked_at_seq
    forks: tuple[RunLink, ...] = ()  # the first CHILDREN_SHOWN runs forked from it, oldest first
    more_forks: int = 0

    def __bool__(self) -> bool:
        return self.parent is not None or bool(self.children) or self.forked_from is not None or bool(self.forks)


def family_of(run: Run) -> Family:
    """The run's parent (the run whose step started it) and its own child runs, the run it was forked from and its
    forks: two index reads each at most."""
    children, more = _first_linked(Run.objects.filter(parent_run_id=run.id))
    forks, more_forks = _first_linked(Run.objects.filter(forked_from_id=run.id))
    return Family(_linked(run.parent_run_id), children, more, _linked(run.forked_from_id), forks, more_forks)


def _linked(run_id: UUID | None) -> RunLink | None:
    found = None if run_id is None else Run.objects.filter(id=run_id).only(*LINKED).first()
    return RunLink.of(found) if found is not None else None


def _first_linked(runs: QuerySet[Run]) -> tuple[tuple[RunLink, ...], int]:
    """The first CHILDREN_SHOWN of `runs`, oldest first, and how many more there are."""
    first = list(runs.order_by("created_at", "id").only(*LINKED)[:CHILDREN_SHOWN + 1])
    more = runs.count() - CHILDREN_SHOWN if len(first) > CHILDREN_SHOWN else 0
    return tuple(RunLink.of(linked) for linked in first[:CHILDREN_SHOWN]), more


# -- The mailbox -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MailboxEvent:
    id: int
    name: str
    sender: str
    received_at: datetime
    consumed_at: datetime | None
    consumed_by: str  # the visit that took it: "listen #2", or the step where it was visited once
    payload: Any
    payload_shown: bool  # False: the payload is contents this user may not read

    @property
    def consumed(self) -> bool:
        return self.consumed_at is not None


@dataclass(frozen=True)
class Mailbox:
    events: tuple[MailboxEvent, ...]  # the newest MAILBOX_SHOWN, in arrival order
    earlier: int  # events received before those, not listed
    unconsumed: int  # of those listed

    def __bool__(self) -> bool:
        return bool(self.events)


def mailbox_of(run: Run, visits: Callable[[], dict[int, str]], contents: bool) -> Mailbox:
    """The run's events in arrival order, each consumed or not and by which visit (`visits()` names them, read
    only when one was consumed); payloads with `contents`."""
    rows = RunEvent.objects.filter(run_id=run.id).order_by("-id")
    newest = list((rows if contents else rows.defer("payload"))[:MAILBOX_SHOWN + 1])
    earlier = rows.count() - MAILBOX_SHOWN if len(newest) > MAILBOX_SHOWN else 0
    named = visits() if any(event.consumed_visit is not None for event in newest) else {}
    events = tuple(_event(event, named, contents) for event in reversed(newest[:MAILBOX_SHOWN]))
    return Mailbox(events, earlier, sum(1 for event in events if not event.consumed))


def _event(event: RunEvent, visits: dict[int, str], contents: bool) -> MailboxEvent:
    by = ""
    if event.consumed_at is not None:
        by = visit_label(visits, event.consumed_visit) or event.consumed_step
    return MailboxEvent(event.id, event.name, event.sender, event.received_at, event.consumed_at, by,
                        event.payload if contents else None, contents)



def run_waits(run: Run, contents: bool) -> dict[str, Any]:
    """The run page's context for its wait, its mailbox and its family; the run's visits read once, if named."""
    visits: dict[int, str] | None = None

    def named() -> dict[int, str]:
        nonlocal visits
        if visits is None:
            visits = visits_of(run)
        return visits

    mailbox = mailbox_of(run, named, contents)
    wait = wait_of(run, named()) if run.status == RunStatus.WAITING else None
    return {"wait": wait, "mailbox": mailbox, "family": family_of(run)}
