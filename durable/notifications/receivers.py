"""The outbox's writer: durable.signals.operator_event becomes a NotificationEvent row in the sender's transaction."""
from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from durable.engine.notifications import EventKind
from durable.notifications import queueing
from durable.notifications.models import NotificationEvent


def record_event(sender: Any, *, kind: EventKind | str, run_id: UUID | str, subject: Any = None, occurrence: Any = "",
                 detail: dict[str, Any] | None = None, **_: Any) -> None:
    """Write the event once (its key is unique: the sweeper's expiry warnings repeat), fan it out after commit.

    `subject` is the request or operation the event is about; by default the run itself.
    """
    kind = EventKind(kind)
    subject = str(subject or run_id)
    key = f"{kind.value}:{subject}:{occurrence}"
    if NotificationEvent.objects.filter(key=key).exists():
        return
    try:
        with transaction.atomic():  # a savepoint: a concurrent writer of the same key leaves the caller's work alone
            event = NotificationEvent.objects.create(key=key, kind=kind, run_id=run_id, subject=subject,
                                                     detail=detail or {}, occurred_at=timezone.now())
    except IntegrityError:
        return
    transaction.on_commit(lambda: queueing.fan_out(event.id))


def connect() -> None:
    from durable.signals import operator_event

    operator_event.connect(record_event, dispatch_uid="durable.notifications.record_event")
