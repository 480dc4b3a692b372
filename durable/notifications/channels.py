"""The two channels: an email through Django's email backend, a signed JSON POST to the install's webhook.

Each message carries the delivery's id (the Durable-Delivery-Id header; the email's Message-ID), so a
receiver that sees it twice, after a crash between the send and its record, can drop the repeat.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.core.mail import EmailMessage

from durable.conf import durable_settings
from durable.engine.errors import classify_status
from durable.engine.json_values import storable_text
from durable.engine.notifications import DELIVERY_ID_HEADER, SIGNATURE_HEADER, signature_header
from durable.notifications.messages import Message
from durable.notifications.models import Channel, NotificationDelivery


@dataclass(frozen=True)
class Result:
    sent: bool
    retryable: bool = False
    status_code: int | None = None
    error: str = ""

    def __post_init__(self) -> None:
        # Recorded on the delivery and its attempt whatever the receiver answered: a NUL in its body would
        # make that write fail and the delivery be tried again and again.
        object.__setattr__(self, "error", storable_text(self.error))


def send(delivery: NotificationDelivery, message: Message, *, timeout: float) -> Result:
    if delivery.channel == Channel.EMAIL:
        return send_email(delivery, message)
    return send_webhook(delivery, message, timeout=timeout)


def message_id(delivery: NotificationDelivery) -> str:
    return f"<{delivery.id}@durable.notifications>"


def send_email(delivery: NotificationDelivery, message: Message) -> Result:
    if not delivery.user.email:
        return Result(False, error="the recipient has no email address")
    email = EmailMessage(message.subject, message.text, settings.DEFAULT_FROM_EMAIL, [delivery.user.email],
                         headers={"Message-ID": message_id(delivery), DELIVERY_ID_HEADER: str(delivery.id)})
    try:
        email.send()
    except OSError as exc:  # smtplib's errors are OSErrors: the server or the network, worth another try
        return Result(False, retryable=True, error=f"{type(exc).__name__}: {exc}")
    return Result(True)


def send_webhook(delivery: NotificationDelivery, message: Message, *, timeout: float) -> Result:
    url = durable_settings.DURABLE_NOTIFY_WEBHOOK_URL
    if not url:
        return Result(False, error="DURABLE_NOTIFY_WEBHOOK_URL is not set")
    body = json.dumps(message.payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", DELIVERY_ID_HEADER: str(delivery.id),
               SIGNATURE_HEADER: signature_header(durable_settings.DURABLE_NOTIFY_WEBHOOK_SECRET, int(time.time()), body)}
    try:
        # No redirects: the endpoint is the one the install set, never one it points elsewhere (SSRF).
        answer = httpx.post(url, content=body, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.HTTPError as exc:  # refused, reset, timed out: the receiver may or may not have it; the id dedups
        return Result(False, retryable=True, error=f"{type(exc).__name__}: {exc}")
    if answer.is_success:
        return Result(True, status_code=answer.status_code)
    retryable, kind = classify_status(answer.status_code)
    return Result(False, retryable=retryable, status_code=answer.status_code,
                  error=f"{kind}: HTTP {answer.status_code} {answer.text[:200]}")
