"""The sweeper's part in notifications: events not yet fanned out, digests whose window ended, deliveries due.

As for runs, the database says what must be sent; a lost message is re-sent here, at most once a grace period.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from durable.conf import durable_settings
from durable.notifications import fanout, queueing
from durable.notifications.delivery import due
from durable.notifications.models import NotificationDelivery, NotificationEvent
from durable.scope import runs_in_scope, scoped_to


@dataclass(frozen=True)
class NotifySweep:
    fanned_out: int
    digests: int
    resent: int


def sweep(limit: int = 500) -> NotifySweep:
    now = timezone.now()
    grace = now - timedelta(seconds=durable_settings.DURABLE_PENDING_GRACE_SECONDS)
    events = list(NotificationEvent.objects.filter(runs_in_scope("run__"), fanned_out_at__isnull=True,
                                                   occurred_at__lt=grace)
                  .order_by("occurred_at").values_list("id", flat=True)[:limit])
    for event_id in events:
        fanout.fan_out(event_id)
    # Digests belong to no run: production's sweeper makes and re-sends them, a tool's scoped one leaves them.
    production = scoped_to() is None
    digests = fanout.collect_digests(now) if production else []
    in_scope = runs_in_scope("event__run__") | Q(event__isnull=True) if production else runs_in_scope("event__run__")
    not_just_sent = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=grace)
    resend = list(NotificationDelivery.objects.filter(due(now) & not_just_sent & in_scope)
                  .order_by("next_attempt_at").values_list("id", flat=True)[:limit])
    if resend:
        NotificationDelivery.objects.filter(id__in=resend).update(enqueued_at=now)
    for delivery_id in resend:
        queueing.deliver(delivery_id)
    return NotifySweep(len(events), len(digests), len(resend))
