"""The errors a user can hit through a service, with what to do about them.

The API answers them as 400 (InvalidInput, naming the field), 403 (Forbidden), 409 (Conflict) and 503
(Unavailable) in durable/api/errors.py; the console shows them on the form. The errors workflow code
raises and the engine classifies (ActivityError, RetryableError, ...) live in durable/engine/errors.py
and are importable from `durable` itself.
"""
from __future__ import annotations

from typing import Any

from durable.engine.ids import canonical_json


class ServiceError(Exception):
    """An error a user can hit, with what to do about it."""


class InvalidInput(ServiceError):
    def __init__(self, errors: dict[str, Any]) -> None:
        super().__init__(canonical_json(errors))
        self.errors = errors


class Forbidden(ServiceError):
    """The user may not do this to this object (separation of duties, a missing role).

    `action` names what was refused in the security log, where every 403 is written (durable.security);
    empty, the log names the endpoint or screen."""

    def __init__(self, message: str, *, action: str = "") -> None:
        super().__init__(message)
        self.action = action


class Unavailable(ServiceError):
    """Something this needs to read is not answering; nothing was done, try again."""


class Conflict(ServiceError):
    """The object is not in a state that allows this; `current` says what it is now."""

    def __init__(self, message: str, *, current: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.current = current
        self.extra = extra  # more for the caller to show, e.g. the newer snapshot
