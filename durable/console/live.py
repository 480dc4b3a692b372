"""Live screens: a polled region answers `304 Not Modified` while what it shows has not changed.

Every screen whose state can change marks the region that shows it `{% live_region %}` (durable/templatetags/
live.py): htmx polls the page every DURABLE_CONSOLE_POLL_SECONDS and live.js sends the version the region shows
as `If-None-Match`. The browser would never revalidate by itself, since every answer is `no-store`
(NoStoreMiddleware, durable/middleware.py); a header the page sets is passed through, and so is the 304. The view decorated with
`@live(state)` reads a cheap `state` (a few columns, a max(updated_at), counts), hashes it with the header's
counts and the user into the version, and answers 304 when the region already shows it, before rendering
anything. An answer that renders the region carries the version as its ETag and in the region itself.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags

from durable.console.requests import ConsoleRequest

NavCount = Callable[[HttpRequest], Any]
State = Callable[..., Any]

# The header's counts (pending approvals, UNKNOWN operations): every live region's version includes them, so a
# region's 200 answer can carry the badges out of band and a change to them is seen on any screen.
NAV_COUNTS: list[NavCount] = []


def nav_count(count: NavCount) -> NavCount:
    """Register a header count; the app that owns it calls this from its AppConfig.ready."""
    if count not in NAV_COUNTS:
        NAV_COUNTS.append(count)
    return count


def stamp(request: ConsoleRequest, state: Any) -> str:
    """The version (a quoted ETag) of what `request`'s user sees in this state; kept on the request for
    the template that renders the region."""
    seen = (request.user.pk, [count(request) for count in NAV_COUNTS], state)
    version = f'"{hashlib.blake2b(repr(seen).encode(), digest_size=12).hexdigest()}"'
    request.live_version = version
    return version


def live(state: State) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorate a GET view whose page holds a live region; `state(request, *args, **kwargs)` is the cheap read."""
    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: ConsoleRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            # Kept on the request, so that a view which shows what the state read (the inbox's tab counts)
            # need not read it a second time.
            request.live_state = state(request, *args, **kwargs)
            version = stamp(request, request.live_state)
            return not_modified(request, version) or tagged(view(request, *args, **kwargs), request)
        return wrapper
    return decorate


def not_modified(request: ConsoleRequest, version: str) -> HttpResponse | None:
    """304 when the polling region already shows `version`; None when it must be rendered."""
    if not (request.htmx and version in parse_etags(request.headers.get("If-None-Match", ""))):
        return None
    unchanged = HttpResponseNotModified()
    unchanged["ETag"] = version
    return unchanged


def tagged(response: HttpResponse, request: HttpRequest) -> HttpResponse:
    """A rendered answer carries the version it shows (the view may have stamped a newer one)."""
    version = getattr(request, "live_version", None)
    if version and response.status_code == 200:
        response["ETag"] = version
    return response
