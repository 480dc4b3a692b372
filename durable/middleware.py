"""durable's middleware, in the order a project lists them (durable/project/settings.py, docs/embedding.md).

- `DatabaseUnavailableMiddleware` first: the last to see a view's exception, it answers a database error
  with a 503 and `Retry-After` (durable/unavailable.py).
- `NoStoreMiddleware` below WhiteNoise: static files keep their long cache, pages are never kept.
- `ActorMiddleware` after AuthenticationMiddleware: the audit trail names who changed a role
  (durable/role_audit.py).
- `OperatorTimezoneMiddleware` after AuthenticationMiddleware: console pages in the operator's zone
  (durable/console/timezones.py).
- `RefusalLogMiddleware` after AuthenticationMiddleware: every 403 answered writes one security-log row
  saying who, what and why (durable/security.py).
"""
from __future__ import annotations

import logging
import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from durable.api.errors import is_api
from durable.console.timezones import operator_zone
from durable.role_audit import request_in_flight
from durable.security import note_refusal, record_forbidden
from durable.unavailable import DATABASE_AWAY, database_unavailable

log = logging.getLogger("durable.web")

GetResponse = Callable[[HttpRequest], HttpResponse]


class DatabaseUnavailableMiddleware:
    """Turns a database error raised by a view (console, API, login) into `database_unavailable`."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_AWAY):
            return None
        log.error("database unavailable while answering %s %s: %s", request.method, request.path, exception)
        return database_unavailable(request)


class NoStoreMiddleware:
    """`Cache-Control: no-store` (Django's never-cache headers) on every answer that reaches it.

    Listed below WhiteNoise, so static files (which carry no user's data) keep their long cache.
    Every dynamic answer gets it, signed in or not: deciding by the user would read the session
    for answers that never did, and the login page is no better cached either.
    """

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        add_never_cache_headers(response)
        return response


class ActorMiddleware:
    """Lets the audit trail name who changed a role during this request (after AuthenticationMiddleware)."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = request_in_flight.set(request)
        try:
            return self.get_response(request)
        finally:
            request_in_flight.reset(token)


class OperatorTimezoneMiddleware:
    """Render every console page in the operator's zone (below the session and authentication middleware)."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = "" if is_api(request) else operator_zone(request)
        if not zone:
            return self.get_response(request)
        timezone.activate(zoneinfo.ZoneInfo(zone))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


class RefusalLogMiddleware:
    """Every 403 answered writes one security-log row (kind `forbidden`) with the reason the refusing code gave:
    a PermissionDenied's message, DRF's `detail`, or `durable.security.refused_because()`."""

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 403:
            record_forbidden(request, response)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        note_refusal(request, exception)
