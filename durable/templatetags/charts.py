"""Small bar charts drawn on the server as inline SVG: `{% hourly_chart series since %}`; no script, no CDN."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import template

register = template.Library()

BAR_WIDTH, GAP, HEIGHT = 8, 2, 36  # pixels of the SVG's own coordinates


@dataclass(frozen=True)
class Bar:
    x: int
    y: int
    height: int
    count: int
    hour: datetime


@register.inclusion_tag("durable/_hourly_chart.html")
def hourly_chart(series: Any, since: datetime) -> dict[str, Any]:
    """One bar per hour of `series.hours`, scaled to the busiest hour; an hour with none draws no bar."""
    peak = max(series.hours) or 1
    bars = []
    for position, count in enumerate(series.hours):
        height = round(HEIGHT * count / peak) if count else 0
        bars.append(Bar(position * (BAR_WIDTH + GAP), HEIGHT - height, height, count,
                        since + timedelta(hours=position)))
    return {"series": series, "bars": bars, "width": len(bars) * (BAR_WIDTH + GAP) - GAP, "height": HEIGHT,
            "bar_width": BAR_WIDTH, "peak": max(series.hours)}


@register.filter
def duration(value: timedelta) -> str:
    """A wait as a person says it: "40 s", "12 min", "3 h 5 min", "2 d 4 h"."""
    seconds = int(value.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60 % 60, seconds // 3600 % 24, seconds // 86400
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min"
