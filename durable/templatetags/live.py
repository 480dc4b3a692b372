"""`{% live_region url %}`: the attributes that make an element a live region (durable/console/live.py)."""
from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from durable.conf import durable_settings

register = template.Library()


@register.simple_tag(takes_context=True)
def live_region(context: dict[str, Any], url: str = "", swap: str = "outerHTML") -> SafeString:
    """Poll `url` (default: the address bar, so a filtered list keeps its filters) and swap the answer in.

    The region shows the version its view stamped; live.js sends it back as If-None-Match.
    """
    request = context["request"]
    seconds = durable_settings.DURABLE_CONSOLE_POLL_SECONDS
    follow = "" if url else " data-live-location"
    return format_html('data-live{} hx-get="{}" hx-trigger="every {}s" hx-swap="{}" data-version="{}"',
                       SafeString(follow), url or request.get_full_path(), f"{seconds:g}", swap,
                       getattr(request, "live_version", ""))
