"""`{% nav_entries as entries %}`: the links the apps built on the core add to the header (durable/console/nav.py)."""
from __future__ import annotations

from django import template

from durable.console.nav import NavEntry, nav_entries as registered

register = template.Library()


@register.simple_tag
def nav_entries() -> list[NavEntry]:
    return registered()
