"""The operator's time zone: kept per user (OperatorPreferences), activated for each console request
(OperatorTimezoneMiddleware, durable/middleware.py).

The zone is read once per session and kept in it, so a page costs no extra query. API answers stay
in UTC (ISO 8601 with its offset): a client converts them itself.
"""
from __future__ import annotations

import zoneinfo
from functools import cache
from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest

from durable.errors import InvalidInput
from durable.models import OperatorPreferences
from durable.permissions import Person

SESSION_KEY = "durable_time_zone"
LABEL = "Time zone"


@cache
def known_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def set_time_zone(*, user: Person, time_zone: str) -> OperatorPreferences:
    """Keep `time_zone` (an IANA name this server knows) as the zone `user` reads the console in."""
    if time_zone not in known_zones():
        raise InvalidInput({"time_zone": [f"“{time_zone[:64]}” is not a time zone this server knows; "
                                          "choose one from the list, e.g. Europe/Paris"]})
    preferences, _ = OperatorPreferences.objects.update_or_create(user=user, defaults={"time_zone": time_zone})
    return preferences


def operator_zone(request: HttpRequest) -> str:
    """The logged-in operator's zone name, "" when they have not set one (nor has their browser)."""
    if not hasattr(request, "session") or not request.user.is_authenticated:
        return ""
    zone = request.session.get(SESSION_KEY)
    if zone is None:
        zone = OperatorPreferences.objects.filter(user=request.user).values_list("time_zone", flat=True).first() or ""
        request.session[SESSION_KEY] = zone
    return zone if zone in known_zones() else ""


def remember(request: HttpRequest, time_zone: str) -> None:
    request.session[SESSION_KEY] = time_zone


def adopt_browser_zone(sender: Any, request: HttpRequest | None, user: Person, **_: Any) -> None:
    """At login, an operator with no zone yet takes the one their browser sent with the form (time-zone.js)."""
    zone = request.POST.get("time_zone", "") if request is not None and request.method == "POST" else ""
    if request is None or zone not in known_zones() or OperatorPreferences.objects.filter(user=user).exists():
        return
    remember(request, set_time_zone(user=user, time_zone=zone).time_zone)


def connect() -> None:
    user_logged_in.connect(adopt_browser_zone, dispatch_uid="durable.console.timezones")
