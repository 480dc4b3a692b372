"""One throttle for every login form (console, browsable API, admin): attempts counted before they are judged.

Each attempt is counted, atomically, before the password is checked, and judged on the count it got: of 24
parallel guesses only DURABLE_LOGIN_ATTEMPTS are ever checked. The count is kept per client address and
normalised username together, so whoever guesses at `ann` from one address locks out that address for
`ann`, not `ann` herself logging in from elsewhere. A looser count per address (across usernames) slows
password spraying. Usernames are compared as NFKC + case-folded text, so `ｌockme1` is `lockme1` here.
A successful login clears its own count. Every refusal and failure goes to the security log.
"""
from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from durable.conf import durable_settings
from durable.models import SecurityEvent
from durable.security import client_address, record_refusal

ADDRESS_FACTOR = 4  # one address may fail this many times the per-user limit, over all usernames
LoginView = TypeVar("LoginView", bound=Callable[..., HttpResponseBase])  # the view wrapped keeps its type


def normalised(username: str) -> str:
    """The form two usernames are the same in, for throttling: NFKC, case-folded, trimmed."""
    return unicodedata.normalize("NFKC", username).casefold().strip()[:150]


def _keys(request: HttpRequest, username: str) -> tuple[str, str]:
    # Hashed: a hostile username (NUL, spaces, 150 characters) must not reach the cache as a key.
    address = client_address(request) or "unknown"
    pair = hashlib.sha256(f"{address}\x00{normalised(username)}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"durable:login:pair:{pair}", f"durable:login:addr:{hashlib.sha256(address.encode()).hexdigest()}"


def _count(key: str) -> int:
    """Add one attempt to `key`'s window and return the new count, atomically in the cache."""
    cache.add(key, 0, timeout=durable_settings.DURABLE_LOGIN_WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # the window ended between add and incr: this attempt opens a new one
        cache.add(key, 0, timeout=durable_settings.DURABLE_LOGIN_WINDOW_SECONDS)
        return cache.incr(key)


def admit(request: HttpRequest, username: str) -> bool:
    """Count this attempt; True when it may be judged, False when it is over a limit."""
    pair, address = _keys(request, username)
    limit = durable_settings.DURABLE_LOGIN_ATTEMPTS
    return _count(pair) <= limit and _count(address) <= limit * ADDRESS_FACTOR


def succeeded(request: HttpRequest, username: str) -> None:
    """The person got in: their (address, username) count starts again; the address keeps its count."""
    cache.delete(_keys(request, username)[0])


def throttle_logins(view: LoginView, *, source: str,
                    refused: Callable[[HttpRequest], HttpResponse] | None = None) -> LoginView:
    """Wrap a login view: POSTs over the limit get 429 without being judged; each outcome is recorded."""
    @wraps(view)
    def throttled(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = str(request.POST.get("username", ""))
        if not admit(request, username):
            record_refusal(kind=SecurityEvent.Kind.LOGIN_THROTTLED, source=source, request=request, username=username,
                           action="login", reason="too many login attempts from this address for this username")
            return refused(request) if refused else _too_many()
        response = view(request, *args, **kwargs)
        if response.status_code in (301, 302, 303) and request.user.is_authenticated:
            succeeded(request, username)
        else:
            record_refusal(kind=SecurityEvent.Kind.LOGIN_FAILED, source=source, request=request, username=username,
                           action="login", reason="wrong username or password")
        return response
    return cast(LoginView, throttled)  # functools.wraps made it look like `view`; typing cannot say so


def _too_many() -> HttpResponse:
    minutes = max(1, round(durable_settings.DURABLE_LOGIN_WINDOW_SECONDS / 60))
    return HttpResponse(f"Too many failed attempts. Wait up to {minutes} minutes and try again.\n", status=429,
                        content_type="text/plain; charset=utf-8")
