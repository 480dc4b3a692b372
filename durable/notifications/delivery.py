"""Sending one delivery under a lease, as a run is advanced: claim (conditional UPDATE, fencing token), send, record.

Only the holder of the delivery's current token records its outcome. A worker that dies mid-send leaves the
delivery SENDING with its lease running out; then the sweeper sends it again (same id). A crash after the
receiver got it and before the record is the one way a receiver sees a delivery twice: it drops the repeat
by the Durable-Delivery-Id.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.notifications import retry_delay
from durable.notifications import channels, messages
from durable.notifications.channels import Result
from durable.notifications.models import DeliveryAttempt, NotificationDelivery, NotificationEvent

Status = NotificationDelivery.Status
AttemptOutcome = DeliveryAttempt.Outcome


@dataclass(frozen=True)
class Claim:
    delivery_id: UUID
    token: int
    attempt: int


def due(now: datetime) -> Q:
    """Ready to send: pending and due, or SENDING under a lease that ran out (its sender died)."""
    return Q(status=Status.PENDING, next_attempt_at__lte=now) | Q(status=Status.SENDING, lease_expires_at__lt=now)


def claim(delivery_id: UUID | str) -> Claim | None:
    """Take the delivery's lease if it is due; the attempt row is written with the claim."""
    row = NotificationDelivery.objects.filter(id=delivery_id).values("fencing_token", "attempts").first()
    if row is None:
        return None
    now = timezone.now()
    lease = timedelta(seconds=durable_settings.DURABLE_NOTIFY_LEASE_SECONDS)
    with transaction.atomic():
        if not NotificationDelivery.objects.filter(due(now), id=delivery_id, fencing_token=row["fencing_token"]).update(
                status=Status.SENDING, fencing_token=F("fencing_token") + 1, attempts=F("attempts") + 1,
                lease_expires_at=now + lease):
            return None
        taken = Claim(UUID(str(delivery_id)), row["fencing_token"] + 1, row["attempts"] + 1)
        DeliveryAttempt.objects.create(delivery_id=delivery_id, number=taken.attempt, fencing_token=taken.token,
                                       started_at=now)
    return taken


def deliver(delivery_id: UUID | str) -> float | None:
    """Claim, send and record one delivery; returns the seconds until its retry, if it has one."""
    taken = claim(delivery_id)
    if taken is None:
        return None  # not due, or another worker holds it: a duplicate message is harmless
    delivery = NotificationDelivery.objects.select_related("event", "user").get(id=taken.delivery_id)
    carried = list(NotificationEvent.objects.filter(deliveries__digest=delivery).order_by("occurred_at", "id"))
    # The call is bounded well inside the lease: no second sender while this one may be in flight.
    timeout = min(durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS, durable_settings.DURABLE_NOTIFY_LEASE_SECONDS / 2)
    result = channels.send(delivery, messages.message(delivery, carried), timeout=timeout)
    return record(taken, result)


def record(taken: Claim, result: Result) -> float | None:
    """Write the attempt's outcome and, while the token holds, the delivery's: sent, retry later, or failed."""
    now = timezone.now()
    outcome = _outcome(taken, result)
    delay = retry_delay(taken.attempt, first=durable_settings.DURABLE_NOTIFY_RETRY_SECONDS)
    by_outcome: dict[str, dict[str, Any]] = {
        AttemptOutcome.SENT: {"status": Status.SENT, "sent_at": now, "last_error": ""},
        AttemptOutcome.RETRY: {"status": Status.PENDING, "next_attempt_at": now + timedelta(seconds=delay),
                               "enqueued_at": now, "last_error": result.error},
        AttemptOutcome.FAILED: {"status": Status.FAILED, "last_error": result.error},
    }
    fields = by_outcome[outcome]
    with transaction.atomic():
        DeliveryAttempt.objects.filter(delivery_id=taken.delivery_id, number=taken.attempt).update(
            finished_at=now, outcome=outcome, status_code=result.status_code, error=result.error)
        held = NotificationDelivery.objects.filter(id=taken.delivery_id, fencing_token=taken.token,
                                                   status=Status.SENDING).update(lease_expires_at=None, **fields)
    return delay if held and outcome == AttemptOutcome.RETRY else None


def _outcome(taken: Claim, result: Result) -> str:
    if result.sent:
        return AttemptOutcome.SENT
    if result.retryable and taken.attempt < durable_settings.DURABLE_NOTIFY_MAX_ATTEMPTS:
        return AttemptOutcome.RETRY
    return AttemptOutcome.FAILED
