"""`durable.send_event`, importable before Django is set up, as every public name of `durable` is (a workflow
module imports them at the top); what it does is durable.events', loaded at the first send."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from durable.events import Delivery
    from durable.permissions import Caller


def send_event(*, name: str, payload: Any = None, run_id: UUID | str | None = None, workflow: str | None = None,
               business_key: str | None = None, idempotency_key: str | None = None, user: Caller | None = None,
               sender: str = "", source: str = "python") -> Delivery:
    """Send an event to a run, by `run_id` or by `workflow` and `business_key` (durable.events.send_event)."""
    from durable import events

    return events.send_event(name=name, payload=payload, run_id=run_id, workflow=workflow, business_key=business_key,
                             idempotency_key=idempotency_key, user=user, sender=sender, source=source)
