"""The Idempotency-Key a write is sent with, read the same way by every endpoint that honours one."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

KEY_MAX_LENGTH = 200  # the columns that keep it (Run.idempotency_key, RunEvent.idempotency_key)
HEADER = OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
                          description="a retry with the same key is the same write, answered 200; the same key "
                                      "with another request is a 409")


def idempotency_key(request: Request, data: Mapping[str, Any]) -> str | None:
    """The body's `idempotency_key`, else the Idempotency-Key header; a 400 naming `idempotency_key` for one the
    database cannot keep (the serializer checks the body's, nothing checks the header's)."""
    key = data.get("idempotency_key") or request.headers.get("Idempotency-Key")
    if key and len(key) > KEY_MAX_LENGTH:
        raise ValidationError({"idempotency_key": [f"Idempotency-Key must be at most {KEY_MAX_LENGTH} characters."]})
    if key and "\x00" in key:  # nor can a text column hold a NUL on Postgres
        raise ValidationError({"idempotency_key": ["Idempotency-Key must not contain NUL characters."]})
    return key or None
