"""The security log's one entry point: every refused attempt is recorded, counted and logged here."""
from __future__ import annotations

import ipaddress
import logging

from django.http import HttpRequest

from durable.permissions import Caller
from durable import metrics
from durable.conf import durable_settings
from durable.models import SecurityEvent

log = logging.getLogger("durable.security")
Kind = SecurityEvent.Kind


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
    metrics.refused(str(kind), source)
    log.warning("refused %s: %s", kind, reason, extra={"security_event": event.pk, "username": event.username,
                                                       "address": event.address, "action": action,
                                                       "target": event.target})
    return event
