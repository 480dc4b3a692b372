"""No page or API answer is kept by a browser or a proxy cache: what a signed-in user saw stays with them."""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import add_never_cache_headers


class NoStoreMiddleware:
    """`Cache-Control: no-store` (Django's never-cache headers) on every answer that reaches it.

    Listed below WhiteNoise, so static files (which carry no user's data) keep their long cache.
    Every dynamic answer gets it, signed in or not: deciding by the user would read the session
    for answers that never did, and the login page is no better cached either.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        add_never_cache_headers(response)
        return response
