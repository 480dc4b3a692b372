"""Sending runs to workers. A message only says "look at this run": the database decides."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from celery import current_app
from django.conf import settings
from django.db import transaction

from durable.conf import durable_settings

ADVANCE_RUN = "durable.advance_run"  # the task (durable/tasks.py), sent by name: tasks imports this module

# Set by durable.testing while a test advances runs in its own process: it takes every message a broker would
# (task name, arguments), and none reaches a broker; the database still decides what runs. None in production.
local_delivery: Callable[[str, list[Any]], None] | None = None


def send(task: str, args: list[Any] | None = None, *, countdown: float | None = None) -> None:
    """Send one of durable's tasks, by name, to the runs' queue."""
    if local_delivery is not None:
        local_delivery(task, list(args or ()))
        return
    current_app.send_task(task, args=args, countdown=countdown, queue=queue())


def enqueue(run_id: UUID | str, *, countdown: float | None = None) -> None:
    # Drills deliver every message twice to prove duplicates are harmless (the lease decides).
    for _ in range(2 if durable_settings.DURABLE_DELIVER_TWICE else 1):
        send(ADVANCE_RUN, [str(run_id)], countdown=countdown)


def send_by_name(task: str) -> None:
    """Send one of durable's tasks without arguments (the workers' daily retention pass) to the runs' queue."""
    send(task)


def queue() -> str | None:
    """The queue runs go to: DURABLE_QUEUE, else the project's Celery default queue."""
    return durable_settings.DURABLE_QUEUE or getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", None)


def enqueue_on_commit(run_id: UUID | str) -> None:
    """Enqueue once the transaction that made the run ready is committed, never before."""
    transaction.on_commit(lambda: enqueue(run_id))


def drop_queue(queue: str) -> None:
    """Purge and delete a queue, so messages nobody will consume do not stay in the broker."""
    with current_app.connection_for_write() as conn:
        bound = current_app.amqp.queues[queue].bind(conn.default_channel)
        bound.declare()  # makes the binding known to this connection, so delete finds it
        bound.purge()
        bound.delete()
