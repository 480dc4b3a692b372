"""`{% unknown_operations_badge %}`: the navigation's UNKNOWN-operations count, for those who may see the ledger.

A tag rather than a context processor, so that a host project's settings need not name it.
"""
from __future__ import annotations

from typing import Any

from django import template

from reconciliation.badge import unknown_badge

register = template.Library()


@register.inclusion_tag("reconciliation/_badge.html", takes_context=True)
def unknown_operations_badge(context: dict[str, Any], oob: bool = False) -> dict[str, Any]:
    request = context.get("request")
    return {"unknown": unknown_badge(request) if request is not None else None, "oob": oob}
