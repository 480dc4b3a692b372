"""Sending notification work to workers by task name; a message only says "look at this row"."""
from __future__ import annotations

from uuid import UUID

from celery import current_app

from durable.runtime.dispatch import queue

FAN_OUT = "durable.notifications.fan_out"
DELIVER = "durable.notifications.deliver"


def fan_out(event_id: int) -> None:
    current_app.send_task(FAN_OUT, args=[event_id], queue=queue())


def deliver(delivery_id: UUID | str, *, countdown: float | None = None) -> None:
    current_app.send_task(DELIVER, args=[str(delivery_id)], countdown=countdown, queue=queue())
