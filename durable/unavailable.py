"""While the database is away: 503 with Retry-After, in JSON under the API and as a plain page elsewhere.

DatabaseUnavailableMiddleware (durable/middleware.py) answers a view's database error with it; Django's
handler500 (`server_error` here) one raised outside a view.
"""
from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers
from django.views.defaults import server_error as django_server_error

from durable.api.errors import is_api

# Connection refused or lost, a failover, a lock or statement timeout: all pass, so the client is told when to retry.
DATABASE_AWAY = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 30


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """The answer while the database is away. Nothing in it reads the session, the user or the database."""
    if is_api(request):  # under whatever prefix the project mounts durable.urls
        response: HttpResponse = JsonResponse(
            {"detail": f"The database is unavailable. Try again in {RETRY_AFTER_SECONDS} seconds.",
             "code": "database_unavailable"}, status=503)
    else:
        # render_to_string without the request: no context processor runs, so nothing asks for the user.
        response = HttpResponse(render_to_string("durable/unavailable.html", {"retry_after": RETRY_AFTER_SECONDS}),
                                status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    add_never_cache_headers(response)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's handler500: a database error raised outside a view (a middleware saving the session) gets the
    same 503; anything else Django's own 500 page."""
    if isinstance(sys.exc_info()[1], DATABASE_AWAY):
        return database_unavailable(request)
    return django_server_error(request)
