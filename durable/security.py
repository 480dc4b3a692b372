"""The security log's one entry point: every refused attempt is recorded, counted and logged here.

Every 403 the product answers is written by one middleware (durable.middleware.RefusalLogMiddleware), whatever
refused it: the refusing code gives its reason (PermissionDenied's message, DRF's `detail`, or
`refused_because()` for a view that renders its own 403), and the row names who, what (the action, or the
endpoint) and why.
"""
from __future__ import annotations

import ipaddress
import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from durable import metrics
from durable.conf import durable_settings
from durable.models import SecurityEvent
from durable.permissions import Caller

log = logging.getLogger("durable.security")
Kind = SecurityEvent.Kind
REASON, RECORDED = "durable_refusal", "durable_refusal_recorded"  # attributes on the HttpRequest


def client_address(request: HttpRequest | None) -> str | None:
    """The caller's address: the proxy's X-Forwarded-For only where the deployment says a proxy sets it."""
    if request is None:
        return None
    address = request.META.get("REMOTE_ADDR", "")
    if durable_settings.DURABLE_BEHIND_TLS_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        address = forwarded or address
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def _storable(text: str) -> str:
    """What an attacker typed, in a form every database column takes: no NUL, no lone surrogate."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def record_refusal(*, kind: Kind | str, source: str, reason: str, request: HttpRequest | None = None,
                   user: Caller | None = None, username: str = "", action: str = "",
                   target: object = "") -> SecurityEvent:
    """Record a refused attempt (who, from where, what, why), count it and log it; returns the row.

    `user` is the authenticated actor when there is one; `username` what an anonymous caller gave.
    """
    if user is not None and user.is_authenticated:
        username, user_id = user.get_username(), str(user.pk)
    else:
        user_id = ""
    event = SecurityEvent.objects.create(
        kind=kind, username=_storable(username)[:150], user_id_at_time=user_id, address=client_address(request),
        source=source[:50], action=_storable(action)[:50], target=_storable(str(target))[:100],
        reason=_storable(reason),
    )
    if request is not None:
        setattr(getattr(request, "_request", request), RECORDED, True)  # DRF's Request wraps the HttpRequest
    metrics.refused(str(kind), source)
    log.warning("refused %s: %s", kind, reason, extra={"security_event": event.pk, "username": event.username,
                                                       "address": event.address, "action": action,
                                                       "target": event.target})
    return event


SOURCES = {"admin": "admin", "api": "api", "rest_framework": "api", "": "web"}  # URL namespace -> source


def request_source(request: HttpRequest) -> str:
    """Which door a request came through, by its URL's namespace: api (and the browsable API's login), admin,
    console (durable's screens, under any prefix), or web (a view of no namespace: /metrics, a host's own)."""
    match = getattr(request, "resolver_match", None)
    return SOURCES.get(match.namespaces[-1] if match is not None and match.namespaces else "", "console")


def _on_login_failed(sender: object, credentials: dict[str, Any], request: HttpRequest | None = None,
                     **kwargs: Any) -> None:
    """Django's user_login_failed: a password judged wrong. An attempt axes refused unjudged (the username or
    address is locked: its backend flags the request, and no failure is counted) is logged as throttled by
    durable.lockout instead."""
    if request is None:
        return
    if getattr(request, "axes_locked_out", False) and getattr(request, "axes_failures_since_start", None) is None:
        return
    record_refusal(kind=Kind.LOGIN_FAILED, source=request_source(request), request=request,
                   username=username_given(request, credentials), action="login", reason="wrong username or password")


def username_given(request: HttpRequest, credentials: dict[str, Any] | None = None) -> str:
    """The username as the caller typed it (the form normalises it before it checks the password)."""
    field = get_user_model().USERNAME_FIELD
    given = request.POST.get(field) or request.POST.get("username")
    return str(given or (credentials or {}).get(field) or (credentials or {}).get("username") or "")


def connect() -> None:
    """Called from the app's ready(): every failed login, at every door, goes to the security log."""
    user_login_failed.connect(_on_login_failed, dispatch_uid="durable-security-login-failed")


# -- every 403 -----------------------------------------------------------------------------------------------


def refused_because(request: HttpRequest, reason: str, action: str = "") -> None:
    """Why the 403 about to be answered is answered (and, optionally, the action refused), for its log row."""
    setattr(getattr(request, "_request", request), REASON, (reason, action))


def _view_name(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    return (match.view_name if match is not None else "") or request.path


def _stated(response: HttpResponse) -> str:
    """The reason a 403 answer gives its caller: DRF's `detail`, or a short plain-text body."""
    data = getattr(response, "data", None)
    if isinstance(data, dict) and data.get("detail"):
        return str(data["detail"])
    if response.get("Content-Type", "").startswith("text/plain") and not response.streaming:
        return response.content.decode("utf-8", "replace").strip()[:500]
    return ""


def _unstated(request: HttpRequest) -> str:
    if request_source(request) == "admin":  # Django's admin refuses with a bare PermissionDenied
        return "the Django admin's permission check: your account lacks the model permission this page needs"
    return f"refused by {_view_name(request)}, which gave no reason"


def record_forbidden(request: HttpRequest, response: HttpResponse) -> None:
    """Write the 403 `response` to the security log (kind `forbidden`) unless its refusal is recorded already:
    the user (or the address), the action or endpoint, the path, and the reason the refusing code gave."""
    if getattr(request, RECORDED, False):
        return
    reason, action = getattr(request, REASON, ("", ""))
    record_refusal(kind=Kind.FORBIDDEN, source=request_source(request), request=request,
                   user=getattr(request, "user", None), action=action or _view_name(request), target=request.path,
                   reason=reason or _stated(response) or _unstated(request))


def note_refusal(request: HttpRequest, exception: Exception) -> None:
    """A view raised `exception`: when it is a PermissionDenied, its message is why the 403 is answered."""
    if isinstance(exception, PermissionDenied) and not hasattr(request, REASON):
        refused_because(request, str(exception), getattr(exception, "action", ""))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: Django's page, with the reason given to the security log."""
    from django.views.csrf import csrf_failure as django_csrf_failure

    refused_because(request, f"the CSRF check failed: {reason}", "csrf")
    return django_csrf_failure(request, reason)
