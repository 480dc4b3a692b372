"""The request as console views receive it: what django-htmx's middleware and the live decorator add to it.

Annotations only (django-htmx's documented way to type `request.htmx`): Django builds plain HttpRequests,
and these attributes are set on them at run time.
"""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class ConsoleRequest(HttpRequest):
    htmx: HtmxDetails  # django_htmx.middleware.HtmxMiddleware, in every project's MIDDLEWARE the apps need
    live_state: Any  # durable.console.live.live: what the region's cheap read returned
    live_version: str  # durable.console.live.stamp: the region's version (a quoted ETag)
