"""From an event to its deliveries: who wants it (preferences and permissions), on which channels, and whether
it goes out now or waits for the recipient's digest."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.notifications import EventKind, window_start
from durable.notifications import queueing
from durable.notifications.models import Channel, NotificationDelivery, NotificationEvent, NotificationPreference

Status = NotificationDelivery.Status

# Who may be told: those who can act on it (the console's roles, durable/roles.py).
PERMISSION = {
    EventKind.APPROVAL_REQUESTED: "approvals.decide_approvalrequest",
    EventKind.APPROVAL_EXPIRING: "approvals.decide_approvalrequest",
    EventKind.APPROVAL_EXPIRED: "approvals.decide_approvalrequest",
    EventKind.OPERATION_UNKNOWN: "durable.resolve_sideeffect",
    EventKind.RUN_NEEDS_ATTENTION: "durable.resolve_sideeffect",
    EventKind.RUN_OVER_BUDGET: "durable.raise_budget",  # those who can raise it, not the reconcilers
    EventKind.RUN_FAILED: "durable.retry_run",
}


def channels_available(user: Any) -> list[str]:
    """The channels that can reach `user`: email needs an address, the webhook an endpoint set by the install."""
    found = []
    if user.email:
        found.append(Channel.EMAIL.value)
    if durable_settings.DURABLE_NOTIFY_WEBHOOK_URL:
        found.append(Channel.WEBHOOK.value)
    return found


def recipients(kind: EventKind) -> Iterator[tuple[Any, str]]:
    """(user, channel) for each active user who asked for `kind`, may act on it, and can be reached."""
    preferences = NotificationPreference.objects.select_related("user").filter(user__is_active=True).order_by("user_id")
    for preference in preferences:
        user = preference.user
        if kind.value not in preference.events or not user.has_perm(PERMISSION[kind]):
            continue
        for channel in channels_available(user):
            if channel in preference.channels:
                yield user, channel


def held_until(user: Any, channel: str, now: datetime) -> datetime | None:
    """The end of the digest window when the recipient already had their share of messages in it; else None."""
    seconds = durable_settings.DURABLE_NOTIFY_DIGEST_WINDOW_SECONDS
    start = window_start(now, seconds)
    sent_alone = NotificationDelivery.objects.filter(
        user=user, channel=channel, event__isnull=False, created_at__gte=start,
    ).exclude(status__in=[Status.HELD, Status.DIGESTED]).count()
    if sent_alone < durable_settings.DURABLE_NOTIFY_DIGEST_AFTER:
        return None
    return start + timedelta(seconds=seconds)


def fan_out(event_id: int) -> list[UUID]:
    """Make the event's deliveries, once (a conditional UPDATE claims the event); send those not held."""
    now = timezone.now()
    with transaction.atomic():
        if not NotificationEvent.objects.filter(id=event_id, fanned_out_at__isnull=True).update(fanned_out_at=now):
            return []  # another worker did, or the event is gone
        event = NotificationEvent.objects.get(id=event_id)
        due = []
        for user, channel in recipients(EventKind(event.kind)):
            until = held_until(user, channel, now)
            delivery = NotificationDelivery.objects.create(
                event=event, user=user, channel=channel, status=Status.HELD if until else Status.PENDING,
                next_attempt_at=until or now, enqueued_at=None if until else now, created_at=now)
            if until is None:
                due.append(delivery.id)
        transaction.on_commit(partial(_deliver_all, due))
    return due


def _deliver_all(delivery_ids: list[UUID]) -> None:
    for delivery_id in delivery_ids:
        queueing.deliver(delivery_id)


def collect_digests(now: datetime | None = None) -> list[UUID]:
    """At a window's end, each recipient's held events go out as one digest delivery."""
    now = now or timezone.now()
    recipients_due = (NotificationDelivery.objects.filter(status=Status.HELD, next_attempt_at__lte=now)
                      .values_list("user_id", "channel").distinct())
    made = [digest for user_id, channel in recipients_due if (digest := _digest(user_id, channel, now))]
    for digest_id in made:
        queueing.deliver(digest_id)
    return made


def _digest(user_id: int, channel: str, now: datetime) -> UUID | None:
    held = NotificationDelivery.objects.filter(user_id=user_id, channel=channel, status=Status.HELD,
                                               next_attempt_at__lte=now)
    with transaction.atomic():
        ids = list(held.values_list("id", flat=True))
        made = timezone.now()
        digest = NotificationDelivery.objects.create(user_id=user_id, channel=channel, status=Status.PENDING,
                                                     next_attempt_at=made, enqueued_at=made, created_at=made)
        # Conditional on HELD: of two sweepers at once, one carries the events; the other makes nothing.
        if not NotificationDelivery.objects.filter(id__in=ids, status=Status.HELD).update(
                status=Status.DIGESTED, digest=digest):
            transaction.set_rollback(True)
            return None
    return digest.id
