"""The notification tasks (sent by name, durable.notifications.queueing): fan an event out, send one delivery."""
from __future__ import annotations

from celery import shared_task

from durable.notifications import delivery, fanout, queueing


@shared_task(name=queueing.FAN_OUT, acks_late=True, ignore_result=True)
def fan_out(event_id: int) -> int:
    return len(fanout.fan_out(event_id))


@shared_task(name=queueing.DELIVER, acks_late=True, ignore_result=True)
def deliver(delivery_id: str) -> None:
    retry_in = delivery.deliver(delivery_id)
    if retry_in is not None:
        queueing.deliver(delivery_id, countdown=retry_in)
