"""What the overview reads, all from the database: the state now, and the last 24 hours hour by hour.

Nothing here comes from process-local counters (Prometheus' totals since a restart): every number is
a query, so two web processes show the same page and the numbers agree with the runs list's filters.
Each query reads an index range, never every run: runs in flight by status, runs started or finished
since the window's start (`run_created`, `run_finished`), prevented duplicates (`journal_duplicates`), the parked
runs due soonest (`run_wake_due`) and parked longest (`run_status_updated`).
durable_console_bench times it at 1,000,000 runs. The apps built on the core add their sections with
`add_section` from their ready() (approvals: requests waiting and decided, approvals/overview.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, QuerySet
from django.db.models.functions import Trunc
from django.utils import timezone

from durable.budgets import WAITING_ON_BUDGET, spent_by
from durable.engine.costs import Spending
from durable.engine.ledger import OperationStatus
from durable.engine.states import TERMINAL, WAITING_STATES, RunStatus
from durable.models import JournalEntry, Run, SideEffect

HOURS = 24
HOUR = timedelta(hours=1)
IN_FLIGHT = [status for status in RunStatus if status not in TERMINAL]
ENDED = [status for status in RunStatus if status in TERMINAL]
BLOCKED_SHOWN = 5
FAILURES_SHOWN = 10
WAITS_SHOWN = 5
# Parked runs may be millions (they cost nothing while they wait): the overview counts them up to this many, so the
# page reads at most this many index entries for them (over it, it says "over 10,000" and links to the list).
PARKED_COUNTED = 10_000
PARKED = ("id", "workflow_name", "workflow_version", "business_key", "current_step", "waiting_for", "next_attempt_at",
          "updated_at", "status")


@dataclass(frozen=True)
class Hourly:
    """A count per clock hour over the window, oldest hour first; the last hour is the current one, so far."""

    name: str
    hours: list[int]

    @property
    def total(self) -> int:
        return sum(self.hours)


@dataclass(frozen=True)
class Parked:
    """The runs parked on a timer, events or child runs (WAITING) that the overview names."""

    soonest_due: list[Run]  # by due time (a timer, an event's deadline), overdue first
    longest: list[Run]  # parked longest ago (their last change is the park)


@dataclass(frozen=True)
class Now:
    in_flight: list[tuple[str, int]]  # every unfinished status, in the state machine's order, zeros included
    unknown_operations: int
    blocked: list[Run]  # the newest runs blocked on their version
    failures: list[Run]  # the newest failed runs
    parked: Parked = Parked([], [])
    waiting_on_budget: int = 0  # of the runs in NEEDS_ATTENTION, those their budget stopped

    @property
    def blocked_total(self) -> int:
        return dict(self.in_flight)[RunStatus.BLOCKED_VERSION]

    @property
    def waiting_total(self) -> int:
        """Runs waiting for anything: a person, a retry's time, a timer, an event, child runs (WAITING_STATES)."""
        return sum(count for status, count in self.in_flight if status in WAITING_STATES)

    @property
    def parked_total(self) -> int:
        return dict(self.in_flight)[RunStatus.WAITING]

    @property
    def counted_up_to(self) -> int:
        """Counts above this are "over" it: the parked runs were counted no further (PARKED_COUNTED)."""
        return PARKED_COUNTED

    @property
    def parked_shown(self) -> str:
        return f"over {PARKED_COUNTED}" if self.parked_total > PARKED_COUNTED else str(self.parked_total)

    @property
    def waiting_shown(self) -> str:
        if self.parked_total > PARKED_COUNTED:
            return f"over {self.waiting_total - 1}"  # the parked runs were counted to PARKED_COUNTED + 1
        return str(self.waiting_total)


@dataclass(frozen=True)
class LastDay:
    since: datetime  # the start of the first hour counted
    started: Hourly
    finished: Hourly  # succeeded, failed or cancelled
    failed: Hourly
    duplicates_prevented: Hourly
    spent: Spending = field(default_factory=Spending)  # by the model calls of the runs started in the window


@dataclass(frozen=True)
class Section:
    """What an app adds to the overview: `read(since)` once per page (the last-day window starts at `since`),
    shown by its templates in the "Waiting for people" list and as rows of the last-day table; `context`
    gives the page what else it reads from it (approvals: the badge's count, so the page counts once)."""

    read: Callable[[datetime], Any]
    now_template: str
    last_day_template: str
    context: Callable[[Any], dict[str, Any]] = lambda data: {}  # nothing more, unless the section says


@dataclass(frozen=True)
class ShownSection:
    """One section as read for this page."""

    section: Section
    data: Any


_sections: dict[str, Section] = {}


def add_section(name: str, section: Section) -> None:
    """Called from an app's ready(): its section shows in the order the apps were installed."""
    _sections[name] = section


@dataclass(frozen=True)
class Overview:
    now: Now
    last_day: LastDay
    sections: tuple[ShownSection, ...] = ()

    def context(self) -> dict[str, Any]:
        """What the sections give the page beside themselves."""
        return {key: value for shown in self.sections for key, value in shown.section.context(shown.data).items()}


def overview() -> Overview:
    day = last_day()
    return Overview(now=state_now(), last_day=day,
                    sections=tuple(ShownSection(section, section.read(day.since)) for section in _sections.values()))


def state_now() -> Now:
    counts = _count_by(Run.objects.filter(status__in=[s for s in IN_FLIGHT if s != RunStatus.WAITING]), "status")
    counts[RunStatus.WAITING] = _count_up_to(Run.objects.filter(status=RunStatus.WAITING), PARKED_COUNTED + 1)
    return Now(
        in_flight=[(status.value, counts.get(status, 0)) for status in IN_FLIGHT],
        unknown_operations=SideEffect.objects.filter(status=OperationStatus.UNKNOWN).count(),
        blocked=_newest(RunStatus.BLOCKED_VERSION, "updated_at") if counts.get(RunStatus.BLOCKED_VERSION) else [],
        failures=_newest(RunStatus.FAILED, "finished_at"),
        parked=parked() if counts.get(RunStatus.WAITING) else Parked([], []),
        waiting_on_budget=(Run.objects.filter(WAITING_ON_BUDGET).count()
                           if counts.get(RunStatus.NEEDS_ATTENTION) else 0),
    )


def parked() -> Parked:
    """The WAITING runs due soonest and those parked longest: two index ranges of WAITS_SHOWN rows each."""
    waiting = Run.objects.filter(status=RunStatus.WAITING).only(*PARKED)
    return Parked(soonest_due=list(waiting.filter(next_attempt_at__isnull=False)
                                   .order_by("next_attempt_at", "id")[:WAITS_SHOWN]),
                  longest=list(waiting.order_by("updated_at", "id")[:WAITS_SHOWN]))


def window_start(now: datetime | None = None) -> datetime:
    """The start of the clock hour 23 hours before the current one: 24 whole or current hours."""
    now = (now or timezone.now()).astimezone(UTC)
    return now.replace(minute=0, second=0, microsecond=0) - (HOURS - 1) * HOUR


def last_day() -> LastDay:
    since = window_start()
    started = hourly(Run.objects.filter(created_at__gte=since), "created_at", since)
    # One read of the run_finished range for both: every run that ended, and those that failed.
    ended = _per_hour(Run.objects.filter(finished_at__gte=since, status__in=ENDED), "finished_at", since, "status")
    duplicates = JournalEntry.objects.filter(kind=JournalEntry.Kind.DUPLICATE_PREVENTED, created_at__gte=since)
    return LastDay(
        since=since,
        started=Hourly("started", started),
        finished=Hourly("finished", [sum(counts.values()) for counts in ended]),
        failed=Hourly("failed", [counts.get(RunStatus.FAILED, 0) for counts in ended]),
        duplicates_prevented=Hourly("duplicates prevented", hourly(duplicates, "created_at", since)),
        spent=spent_since(since),
    )


def spent_since(since: datetime) -> Spending:
    """What the model calls of the runs started since `since` used (the run_created range, as `started` reads)."""
    return spent_by(Run.objects.filter(created_at__gte=since))


def hourly(rows: QuerySet, field: str, since: datetime) -> list[int]:
    """Rows counted per clock hour of `field` (UTC), grouped by the database."""
    return [counts.get("", 0) for counts in _per_hour(rows, field, since)]


def _per_hour(rows: QuerySet, field: str, since: datetime, by: str = "") -> list[dict[str, int]]:
    """For each clock hour of `field` (UTC) in the window, rows counted by the value of `by` ("" if none)."""
    hours: list[dict[str, int]] = [{} for _ in range(HOURS)]
    grouped = rows.annotate(hour=Trunc(field, "hour", tzinfo=UTC)).order_by().values("hour", *filter(None, [by]))
    for row in grouped.annotate(n=Count("*")):
        position = int((row["hour"] - since) / HOUR)
        if 0 <= position < HOURS:
            key = row[by] if by else ""
            hours[position][key] = hours[position].get(key, 0) + row["n"]
    return hours


def _count_by(rows: QuerySet, field: str) -> dict:
    # COUNT(*), not COUNT(id): an index alone can answer it (an index-only scan, no table reads).
    return dict(rows.order_by().values_list(field).annotate(n=Count("*")))


def _count_up_to(rows: QuerySet, most: int) -> int:
    # COUNT(*) over a LIMIT: the index range is read no further than `most` entries.
    return rows.order_by().values("pk")[:most].count()


def _newest(status: RunStatus, when: str) -> list[Run]:
    # Newest by when the run got there: blocked (its last change) or failed (it finished).
    size = BLOCKED_SHOWN if status == RunStatus.BLOCKED_VERSION else FAILURES_SHOWN
    runs = Run.objects.filter(status=status, **{f"{when}__isnull": False}).order_by(f"-{when}", "-id")
    return list(runs.only("id", "workflow_name", "workflow_version", "business_key", "current_step", "error",
                          when)[:size])
