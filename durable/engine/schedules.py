"""Schedules' rules: which fire times a due schedule starts runs for, by its catch-up policy.

The cron expression itself is read outside the engine (durable/crons.py); these rules take its two questions as
functions: the first fire time after a moment, and the last one at or before it. Times are aware datetimes.
"""
from __future__ import annotations

import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

NextAfter = Callable[[datetime], datetime]  # the first fire time strictly after a moment
LastAtOrBefore = Callable[[datetime], "datetime | None"]  # the last fire time at or before a moment, if any

_TICK = timedelta(microseconds=1)  # fire times are whole seconds: one microsecond before one is before it alone


class Overlap(StrEnum):
    """What a fire time does while the schedule's last run has not ended."""

    SKIP = "skip"  # no run for this fire time (a nightly job that is still going is not started twice)
    START_ANYWAY = "start_anyway"  # a run is started all the same


class CatchUp(StrEnum):
    """What a schedule starts for the fire times that passed while nothing fired it (every worker down)."""

    NONE = "none"  # nothing: only fire times found on time start runs
    LATEST = "latest"  # one run, for the latest fire time that passed
    ALL = "all"  # a run for each fire time within the schedule's catch-up window, oldest first


@dataclass(frozen=True)
class Firing:
    """What one look at a due schedule decides: the fire times to start runs for, oldest first, whether earlier
    ones were passed over (missed, by the catch-up policy), and the first fire time left for a later look."""

    fire_times: tuple[datetime, ...]
    passed_over: bool
    next_fire_at: datetime


def fire_times_due(*, due_at: datetime, now: datetime, next_after: NextAfter, last_at_or_before: LastAtOrBefore,
                   catch_up: CatchUp, window: timedelta, on_time: timedelta, limit: int = 100) -> Firing:
    """The fire times of a schedule first due at `due_at` that start runs at `now` (the database's clock).

    `due_at` counts as a fire time (it was one when it was written). A fire time found no later than `on_time` after
    it is on time, whatever the policy; an older one was missed (the workers were down) and starts a run only as
    `catch_up` says. ALL starts at most `limit` runs per look, oldest first; the rest stay due for the next look, so
    a long outage is caught up in bounded steps.
    """
    if due_at > now:
        return Firing((), False, due_at)
    since = {CatchUp.ALL: now - max(window, on_time)}.get(catch_up, now - on_time)
    times = _between(max(due_at, since), now, due_at, next_after, limit + 1)
    if catch_up is CatchUp.LATEST and not times:
        latest = last_at_or_before(now)
        times = [latest if latest is not None and latest > due_at else due_at]
    if len(times) > limit:  # ALL, far behind: what is left is due at once, at the next look
        return Firing(tuple(times[:limit]), times[0] > due_at, times[limit])
    return Firing(tuple(times), not times or times[0] > due_at, next_after(now))


def _between(start: datetime, end: datetime, due_at: datetime, next_after: NextAfter, most: int) -> list[datetime]:
    """The fire times from `start` to `end`, both included, at most `most` of them. `due_at` is one whatever the
    expression says (it was one when it was written; a test or a tool may move it)."""
    times: list[datetime] = []
    at = due_at if start == due_at else next_after(start - _TICK)
    while at <= end and len(times) < most:
        times.append(at)
        at = next_after(at)
    return times


BUSINESS_KEY_FIELDS = ("schedule", "fire_time")  # what a business key template may name
DEFAULT_BUSINESS_KEY = "{schedule}:{fire_time:%Y-%m-%dT%H:%M}"


def business_key_for(template: str, *, schedule: str, fire_time: datetime) -> str:
    """The business key of the run a fire time starts: `template` with the schedule's name and the fire time (in the
    schedule's time zone, so "{fire_time:%Y-%m-%d}" is the local date). A ValueError says what is wrong with it."""
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if name not in BUSINESS_KEY_FIELDS or conversion or "{" in (spec or ""):
            raise ValueError(f"{{{name}}} is not a field of a business key template: use {{schedule}} and "
                             "{fire_time} (with a strftime format: {fire_time:%Y-%m-%d})")
    try:
        key = template.format(schedule=schedule, fire_time=fire_time)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"the template cannot be filled in: {exc}") from None
    if not key.strip():
        raise ValueError("the template gives an empty business key")
    return key


@dataclass(frozen=True)
class Scheduled:
    """A schedule declared with its workflow in code: `Workflow(..., schedules=[Scheduled("nightly", "0 2 * * *",
    time_zone="Europe/Paris", input={...})])`. The code owns its definition; operators may pause and resume it."""

    name: str
    cron: str
    time_zone: str = "UTC"
    input: Mapping[str, Any] = field(default_factory=dict)
    business_key: str = DEFAULT_BUSINESS_KEY
    overlap: Overlap = Overlap.SKIP
    catch_up: CatchUp = CatchUp.LATEST
    catch_up_window: timedelta = timedelta(days=1)  # how far back CatchUp.ALL reaches
    paused: bool = False  # as first written; afterwards an operator's pause or resume stands
