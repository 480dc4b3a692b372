"""The audit trail: every operator action appended, with who did it, from where, and the status before and after.

Every service that changes something on a person's behalf (the run operations, approvals, resolutions,
tokens, role grants, version migrations) records it here, inside its own transaction, so the action and
its record commit or roll back together. The trail is append-only: nothing updates or deletes a row.
"""
from __future__ import annotations

from typing import Any

from durable.models import OperatorAction, Run
from durable.permissions import Caller, Person


def acting_user(user: Caller | None) -> Person | None:
    """The user to record as the actor: None for the machine or an anonymous caller."""
    return user if user is not None and user.is_authenticated else None


def audit(*, user: Caller | None, action: str, run: Run | None, source: str, status_before: str,
          status_after: str, reason: str = "", operation_id: str = "", detail: dict[str, Any] | None = None,
          ) -> OperatorAction:
    """Append an operator action to the audit trail, inside the caller's transaction."""
    actor = acting_user(user)
    return OperatorAction.objects.create(
        actor=actor, actor_username=actor.get_username() if actor else "", actor_user_id=str(actor.pk) if actor else "",
        action=action, run=run, source=source, status_before=status_before,
        status_after=status_after, reason=reason, operation_id=operation_id, detail=detail,
    )
