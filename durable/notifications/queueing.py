"""Sending notification work to workers by task name; a message only says "look at this row"."""
from __future__ import annotations

from uuid import UUID

from durable.runtime.dispatch import send

FAN_OUT = "durable.notifications.fan_out"
DELIVER = "durable.notifications.deliver"


def fan_out(event_id: int) -> None:
    send(FAN_OUT, [event_id])


def deliver(delivery_id: UUID | str, *, countdown: float | None = None) -> None:
    send(DELIVER, [str(delivery_id)], countdown=countdown)
