"""Login lockout through django-axes: who is locked out, for how long, what they are told, and the security log.

Imported only where axes is installed (the app's ready(), axes' settings): it imports axes' models, which a host
without "axes" in INSTALLED_APPS cannot load (it gets durable.W030 instead).

Every door that checks a password goes through `django.contrib.auth.authenticate()`, so axes' backend (first in
AUTHENTICATION_BACKENDS) refuses a locked username or address at all of them: the console's login, the
browsable API's, the admin's. The API itself takes no password (only API tokens), so it is no oracle.

What this module adds to axes (each named in a setting of the standalone project, docs/embedding.md):
- usernames compared NFKC-normalised and case-folded, so `ｌockme1` and `LockMe1` count as `lockme1`;
- the address through durable's own rule (X-Forwarded-For only behind DURABLE_BEHIND_TLS_PROXY);
- an address may fail ADDRESS_FACTOR times the per-username limit (an office behind one NAT), a username the
  limit itself from all addresses together (credential stuffing from a botnet);
- the console's own page for a lockout (429), plain text at the other doors;
- each lockout, and each attempt refused during one, in the security log.
"""
from __future__ import annotations

import unicodedata
from datetime import timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_cool_off, get_lockout_parameters
from axes.signals import user_locked_out
from django.contrib.auth.views import LoginView
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from durable.console.login import CONSOLE_LOGIN, CONSOLE_TEMPLATE
from durable.models import SecurityEvent
from durable.security import record_refusal, request_source, username_given

ADDRESS_FACTOR = 4  # one address may fail this many times the per-username limit, over all usernames


def normalised(username: str) -> str:
    """The form two usernames are the same in, for lockout: NFKC, case-folded, trimmed, storable (no NUL)."""
    return unicodedata.normalize("NFKC", username).casefold().strip().replace("\x00", "\ufffd")[:150]


def username_of(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    """AXES_USERNAME_CALLABLE: the username tried, normalised; None when none was given."""
    return normalised(username_given(request, credentials)) or None


class LoginAttemptHandler(AxesDatabaseHandler):
    """axes' database handler (one lock state in the database every web process shares), with the address's
    allowance ADDRESS_FACTOR times a username's: failures by address count 1/ADDRESS_FACTOR each."""

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        parameters = get_lockout_parameters(request, credentials)
        counts = [attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
                  for attempts in self.get_user_attempts(request, credentials)]
        return max((count // ADDRESS_FACTOR if parameter == "ip_address" else count
                    for parameter, count in zip(parameters, counts, strict=True)), default=0)


def cool_off_minutes(request: HttpRequest | None) -> int:
    return max(1, round((get_cool_off(request) or timedelta(minutes=15)).total_seconds() / 60))


def refusal_message(request: HttpRequest | None) -> str:
    return f"Too many failed attempts. Wait up to {cool_off_minutes(request)} minutes and try again."


def locked_out(request: HttpRequest, original_response: HttpResponse | None = None,
               credentials: dict[str, Any] | None = None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: 429, the console's login page saying so at the console, plain text elsewhere."""
    match = request.resolver_match
    if match is not None and match.view_name == CONSOLE_LOGIN:
        view = LoginView(request=request)
        context = view.get_context_data(form=view.get_form_class()(request), throttled=True,
                                        throttled_message=refusal_message(request))
        response = TemplateResponse(request, CONSOLE_TEMPLATE, context, status=429)
        return response.render()
    return HttpResponse(refusal_message(request) + "\n", status=429, content_type="text/plain; charset=utf-8")


def _on_locked_out(sender: object, request: HttpRequest | None = None, username: str | None = None,
                   ip_address: str | None = None, **kwargs: Any) -> None:
    """axes' user_locked_out: sent once by the attempt that locks, and once by each attempt refused while locked."""
    if request is None:
        return
    record_refusal(kind=SecurityEvent.Kind.LOGIN_THROTTLED, source=request_source(request), request=request,
                   username=username_given(request) or username or "", action="login",
                   reason=f"locked out for {cool_off_minutes(request)} minutes: too many failed logins for this "
                          f"username (from any address) or from this address")


def connect() -> None:
    """Called from the app's ready() when axes is installed."""
    user_locked_out.connect(_on_locked_out, dispatch_uid="durable-lockout-security-log")
