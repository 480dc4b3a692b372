"""Cron expressions in a time zone, read by cronsim: checked once, then asked for fire times (in UTC).

Five fields (minute hour day-of-month month day-of-week), evaluated in the schedule's time zone, so "30 2 * * *"
in Europe/Paris is half past two in Paris whatever the season; on the spring-forward night it fires at 03:00,
and on the fall-back night once (cronsim's reading of DST changes, as Debian's cron does).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_TICK = timedelta(microseconds=1)


class InvalidCron(ValueError):
    """A cron expression or a time zone that cannot be read; `field` names which ("cron" or "time_zone")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Cron:
    expression: str
    zone: ZoneInfo

    def next_after(self, at: datetime) -> datetime:
        """The first fire time strictly after `at`, in UTC."""
        return next(CronSim(self.expression, at.astimezone(self.zone))).astimezone(UTC)

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """The last fire time at or before `at`, in UTC (cronsim's reverse walk is strictly before its start)."""
        try:
            return next(CronSim(self.expression, (at + _TICK).astimezone(self.zone), reverse=True)).astimezone(UTC)
        except StopIteration:
            return None


def parse_cron(expression: str, time_zone: str) -> Cron:
    """The expression in the zone, checked: an InvalidCron naming the field if either cannot be read, or if the
    expression never fires (the 30th of February)."""
    zone = parse_time_zone(time_zone)
    expression = " ".join(expression.split())
    try:
        cron = Cron(expression, zone)
        cron.next_after(datetime.now(UTC))
    except CronSimError as exc:
        raise InvalidCron("cron", f"{expression!r} is not a cron expression: {exc}. Five fields: minute hour "
                                  "day-of-month month day-of-week, e.g. '30 2 * * *' for 02:30 every day") from None
    except StopIteration:
        raise InvalidCron("cron", f"{expression!r} never fires") from None
    return cron


def parse_time_zone(time_zone: str) -> ZoneInfo:
    """An IANA time zone by its name ("Europe/Paris", "UTC"), or an InvalidCron naming `time_zone`."""
    try:
        return ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidCron("time_zone", f"{time_zone!r} is not a time zone: give an IANA name such as "
                                       "'Europe/Paris' or 'UTC'") from None
