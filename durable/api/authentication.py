"""`Authorization: Token <token>` against durable's own API tokens (durable/tokens.py): hashed, expiring, revocable."""
from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from durable.models import SecurityEvent
from durable.security import record_refusal
from durable.tokens import TokenRefused, authenticate_token


class ApiTokenAuthentication(authentication.TokenAuthentication):
    """The same header clients always sent; a revoked or expired token is a 401 that says which and when."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        self.request = request  # DRF makes one authenticator per request
        return super().authenticate(request)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if "\x00" in key:  # Postgres cannot even compare a NUL: refuse before asking it
            raise exceptions.AuthenticationFailed("Invalid token.")
        try:
            row = authenticate_token(key)
        except TokenRefused as refusal:
            if refusal.prefix:  # a real token, revoked or expired: someone still holds it, which is worth a trace
                record_refusal(kind=SecurityEvent.Kind.TOKEN_REFUSED, source="api", request=self.request,
                               action="api_token", target=refusal.prefix, reason=refusal.message)
            raise exceptions.AuthenticationFailed(refusal.message) from None
        return row.user, row
