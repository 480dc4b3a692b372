"""`{{ name|field_label }}`: an error's field as an operator reads it (durable.labels), not its internal name."""
from __future__ import annotations

from django import template

from durable.labels import label_for

register = template.Library()


@register.filter
def field_label(name: str) -> str:
    return label_for(str(name))
