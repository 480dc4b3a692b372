"""What a delivery says: the subject and text of an email, the JSON of a webhook, for one event or a digest."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable.conf import durable_settings
from durable.console.pages import page_url
from durable.engine.notifications import LABELS, EventKind
from durable.notifications.models import NotificationDelivery, NotificationEvent

# The console page each kind of event points at: the kind of object it shows (durable/console/pages.py, where
# the apps register theirs) and the event's field naming it (the subject or the run).
PAGE = {
    EventKind.APPROVAL_REQUESTED: ("approval", "subject"),
    EventKind.APPROVAL_EXPIRING: ("approval", "subject"),
    EventKind.APPROVAL_EXPIRED: ("approval", "subject"),
    EventKind.OPERATION_UNKNOWN: ("operation", "subject"),
    EventKind.RUN_NEEDS_ATTENTION: ("run", "run_id"),
    EventKind.RUN_OVER_BUDGET: ("run", "run_id"),
    EventKind.RUN_FAILED: ("run", "run_id"),
}


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    payload: dict[str, Any]  # the webhook's JSON body


def console_url(event: NotificationEvent) -> str:
    """The event's page, absolute when DURABLE_NOTIFY_CONSOLE_URL says where the console is."""
    kind, argument = PAGE[EventKind(event.kind)]
    path = page_url(kind, getattr(event, argument))  # "" when no installed app shows that kind
    return durable_settings.DURABLE_NOTIFY_CONSOLE_URL.rstrip("/") + path if path else ""


def event_json(event: NotificationEvent) -> dict[str, Any]:
    return {"id": event.id, "kind": event.kind, "subject": event.subject, "run_id": str(event.run_id),
            "occurred_at": event.occurred_at.isoformat(), "detail": event.detail, "url": console_url(event)}


def headline(event: NotificationEvent) -> str:
    about = event.detail.get("business_key") or event.subject
    return f"{LABELS[EventKind(event.kind)]}: {about}"


def _lines(event: NotificationEvent) -> list[str]:
    lines = [headline(event), f"At {event.occurred_at.isoformat(timespec='seconds')}"]
    lines += [f"{name.replace('_', ' ')}: {value}" for name, value in sorted(event.detail.items())]
    url = console_url(event)
    return lines + ([f"Open it: {url}"] if url else [])


def message(delivery: NotificationDelivery, carried: list[NotificationEvent]) -> Message:
    """One event's message, or a digest's of `carried` (the events it carries)."""
    recipient = delivery.user.get_username()
    base = {"delivery_id": str(delivery.id), "recipient": recipient}
    if delivery.event is not None:
        event = delivery.event
        return Message(f"[durable] {headline(event)}", "\n".join(_lines(event)),
                       {**base, "digest": False, "event": event_json(event)})
    text = "\n\n".join("\n".join(_lines(event)) for event in carried)
    return Message(f"[durable] {len(carried)} notifications (digest)",
                   f"More happened than one message each would tell well; here is all of it.\n\n{text}",
                   {**base, "digest": True, "events": [event_json(event) for event in carried]})
