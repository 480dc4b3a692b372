"""The login page, with failed attempts throttled per username and per client address."""
from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


def _attempt_keys(request: HttpRequest) -> list[str]:
    username = (request.POST.get("username") or "").strip().lower()[:150]
    # Hashed: a hostile username (NUL, spaces, 150 characters) must not reach the cache as a key.
    user_digest = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()
    address = request.META.get("REMOTE_ADDR", "")
    return [f"durable:login-failures:user:{user_digest}", f"durable:login-failures:addr:{address}"]


class ThrottledLoginView(LoginView):
    """After DURABLE_LOGIN_ATTEMPTS failures for one username or from one address within
    DURABLE_LOGIN_WINDOW_SECONDS, further attempts get 429 until the window passes."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if any((cache.get(key) or 0) >= settings.DURABLE_LOGIN_ATTEMPTS for key in _attempt_keys(request)):
            context = self.get_context_data(form=self.get_form(), throttled=True)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        for key in _attempt_keys(self.request):
            cache.add(key, 0, timeout=settings.DURABLE_LOGIN_WINDOW_SECONDS)
            cache.incr(key)
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        cache.delete(_attempt_keys(self.request)[0])  # the person got in; their address keeps its count
        return super().form_valid(form)
