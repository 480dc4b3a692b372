"""What a WAITING run waits for, in a list's row: `{{ run|waiting_summary }}` ("timer, 2 h left"; durable/console/waits.py)."""
from __future__ import annotations

from django import template
from django.utils import timezone

from durable.console.waits import summary
from durable.models import Run

register = template.Library()


@register.filter
def waiting_summary(run: Run) -> str:
    return summary(run, timezone.now())
