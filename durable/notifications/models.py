"""The notification outbox: preferences, events, deliveries and each delivery's attempts (app label `durable`)."""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from durable.engine.notifications import LABELS, EventKind

EVENT_CHOICES = [(kind.value, LABELS[kind]) for kind in EventKind]


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    WEBHOOK = "webhook", "Webhook"


class NotificationPreference(models.Model):
    """What one user wants to be told of, and how. No row: nothing (notifications are asked for, never imposed)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="notification_preference")
    events = models.JSONField(default=list, blank=True, help_text="EventKind values")
    channels = models.JSONField(default=list, blank=True, help_text="Channel values")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.events) or 'nothing'} by {', '.join(self.channels) or 'no channel'}"


class NotificationEvent(models.Model):
    """One thing that happened, written in the transaction that made it happen (the outbox row)."""

    key = models.CharField(max_length=200, unique=True, help_text="kind:subject:occurrence; the same key is one event")
    kind = models.CharField(max_length=40, choices=EVENT_CHOICES)
    run = models.ForeignKey("durable.Run", on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=100, help_text="the run, approval request or operation it is about")
    detail = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    fanned_out_at = models.DateTimeField(null=True, blank=True, help_text="when its deliveries were made")

    class Meta:
        ordering = ["-occurred_at", "-id"]
        indexes = [models.Index(fields=["occurred_at"], condition=Q(fanned_out_at__isnull=True),
                                name="notify_event_unfanned")]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject}"


class NotificationDelivery(models.Model):
    """One event (or one digest of events) for one recipient on one channel; its id is the Durable-Delivery-Id."""

    class Status(models.TextChoices):
        HELD = "HELD", "Held for the digest"
        PENDING = "PENDING", "Pending"
        SENDING = "SENDING", "Sending"
        SENT = "SENT", "Sent"
        FAILED = "FAILED", "Failed"
        DIGESTED = "DIGESTED", "Sent in a digest"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(NotificationEvent, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="deliveries", help_text="empty for a digest")
    digest = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried",
                               help_text="the digest that carried this event")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    fencing_token = models.PositiveBigIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(help_text="when it is due (a held one: its digest window's end)")
    enqueued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["event", "user", "channel"], name="notify_once_per_recipient")]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_delivery_due"),
                   models.Index(fields=["user", "channel", "created_at"], name="notify_delivery_recipient")]

    def __str__(self) -> str:
        return f"{self.channel} to {self.user} {self.status}"


class DeliveryAttempt(models.Model):
    """One try at sending: written when it starts (a crash leaves it without an outcome), finished after."""

    class Outcome(models.TextChoices):
        SENT = "sent", "Sent"
        RETRY = "retry", "Failed, will retry"
        FAILED = "failed", "Failed for good"

    delivery = models.ForeignKey(NotificationDelivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveIntegerField()
    fencing_token = models.PositiveBigIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True,
                               help_text="empty: the sender stopped before it could say (a crash)")
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="notify_attempt_number")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}: {self.outcome or 'no outcome'}"
