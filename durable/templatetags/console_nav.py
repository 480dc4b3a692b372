"""`{% nav_entries as entries %}`: the links the apps built on the core add to the header (durable/console/nav.py);
`{% page_url kind id as url %}`: the page an app shows an object on (durable/console/pages.py)."""
from __future__ import annotations

from typing import Any

from django import template

from durable.console import pages
from durable.console.nav import NavEntry
from durable.console.nav import nav_entries as registered

register = template.Library()


@register.simple_tag
def nav_entries() -> list[NavEntry]:
    return registered()


@register.simple_tag(takes_context=True)
def page_url(context: dict[str, Any], kind: str, *args: Any) -> str:
    """`{% page_url "operation" op.operation_id as url %}`: the page showing it, or "" (durable/console/pages.py)."""
    return pages.page_url(kind, *args, user=context.get("user"))
