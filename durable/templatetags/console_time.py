"""Times in the console: absolute in the operator's time zone, the relative beside it, and durations.

`{{ at|when }}` renders `<time datetime="2026-12-04T17:14:15Z">2026-12-05 02:14:15 JST <small
class="relative">2 days ago</small></time>`: whole seconds, the zone's abbreviation, in the zone
durable.timezones activated for the operator. `{{ delta|duration }}` says how long, in the
largest two units that matter ("3 min 5 s", "2 days 4 h").
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from durable.console import timezones

register = template.Library()


@register.simple_tag(takes_context=True)
def operator_time_zone(context: template.Context) -> str:
    """The operator's zone name, "" while they have none (then base.html asks their browser for it)."""
    request = context.get("request")
    return timezones.operator_zone(request) if request is not None else ""

UNITS = (("day", 86400), ("h", 3600), ("min", 60), ("s", 1))


def absolute(at: datetime) -> str:
    """`at` in the active time zone, to the second, with the zone's abbreviation."""
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S %Z")


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _amount(seconds: float, parts: int) -> str:
    """`seconds` in its largest unit, and the next one when it adds something: "3 min 5 s", "2 days"."""
    if seconds < 10 and parts > 1:
        return f"{seconds:.1f} s".replace(".0 s", " s") if seconds >= 0.1 else f"{seconds * 1000:.0f} ms"
    whole, said = int(seconds), list[str]()
    for name, size in UNITS:
        count, whole = divmod(whole, size)
        if count and len(said) < parts:
            said.append(f"{count} {name}{'s' if name == 'day' and count != 1 else ''}")
        elif said:
            break  # "2 days 0 h 5 min" reads as "2 days"
    return " ".join(said) or "0 s"


def relative(at: datetime, now: datetime) -> str:
    """How far `at` is from `now` in one unit: "in 3 h", "2 days ago", "just now"."""
    seconds = (at - now).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    amount = _amount(abs(seconds), parts=1)
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


@register.filter
def duration(value: timedelta | None) -> str:
    """How long, in at most two units: "0.4 s", "3 min 5 s", "2 days 4 h"."""
    if value is None:
        return ""
    return _amount(max(value.total_seconds(), 0.0), parts=2)


def render_when(at: datetime, now: datetime | None) -> SafeString:
    """`at` absolute, with the relative beside it unless `now` is None."""
    if now is None:
        return format_html('<time class="when" datetime="{}">{}</time>', iso(at), absolute(at))
    return format_html('<time class="when" datetime="{}">{} <small class="relative">{}</small></time>',
                       iso(at), absolute(at), relative(at, now))


@register.filter
def when(value: datetime | None, relative_to: str = "now") -> SafeString | str:
    """A time as the operator reads it: absolute in their zone, with how long ago or how soon.

    `{{ at|when:"countdown" }}` leaves the relative to a live countdown beside it (an approval's expiry).
    """
    if value is None:
        return ""
    return render_when(value, None if relative_to == "countdown" else timezone.now())
