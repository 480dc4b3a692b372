"""A password validator for the passwords this project itself publishes (the demo's), on top of Django's own."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

# Printed by `bin/demo` and written in the README: anyone can read them, so no real account may use them.
PUBLISHED = frozenset({"durable-demo"})


class PublishedPasswordValidator:
    """Refuses a password durable's own docs and demo print. The demo sets its users' password directly."""

    def validate(self, password: str, user: Any = None) -> None:
        if password.strip().casefold() in PUBLISHED:
            raise ValidationError("This password is published in durable's demo and docs; choose another.",
                                  code="password_published")

    def get_help_text(self) -> str:
        return "Your password can't be one that durable's demo or documentation shows."
