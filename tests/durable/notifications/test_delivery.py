"""Sending a delivery: signed webhooks to a real HTTP receiver, email through Django's locmem backend, retries with
backoff, failure after the last attempt, and a lease so two senders never both record one delivery."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from durable.engine.notifications import EventKind
from durable.models import DeliveryAttempt, NotificationDelivery
from durable.notifications import delivery, fanout
from durable.roles import ADMIN
from tests.durable.notifications.conftest import a_run, emit, subscriber

pytestmark = pytest.mark.django_db
Status = NotificationDelivery.Status


def one_delivery(channel: str, kind: EventKind = EventKind.RUN_FAILED) -> NotificationDelivery:
    subscriber("ann", ADMIN, channels=(channel,))
    run = a_run("ORD-1001")
    [delivery_id] = fanout.fan_out(emit(kind, run, business_key="ORD-1001", message="card declined").id)
    return NotificationDelivery.objects.get(id=delivery_id)


def attempts(row: NotificationDelivery) -> list[tuple[int, str, int | None]]:
    return list(DeliveryAttempt.objects.filter(delivery=row).values_list("number", "outcome", "status_code"))


def make_due(row: NotificationDelivery) -> None:
    NotificationDelivery.objects.filter(id=row.id).update(next_attempt_at=timezone.now())


def test_a_webhook_reaches_a_real_receiver_signed_and_carrying_its_delivery_id(webhook, settings):
    settings.DURABLE_NOTIFY_CONSOLE_URL = "https://ops.example.com/durable/"
    row = one_delivery("webhook")
    assert delivery.deliver(row.id) is None
    [request] = webhook.requests
    assert request["signed"] and request["delivery_id"] == str(row.id)
    body = request["body"]
    assert (body["delivery_id"], body["recipient"], body["digest"]) == (str(row.id), "ann", False)
    assert body["event"]["kind"] == "run_failed" and body["event"]["detail"]["business_key"] == "ORD-1001"
    assert body["event"]["url"] == f"https://ops.example.com/durable/runs/{row.event.run_id}/"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.sent_at is not None) == (Status.SENT, 1, True)
    assert attempts(row) == [(1, "sent", 200)]


def test_a_webhook_answered_500_is_retried_with_a_growing_backoff_then_sent_once(webhook, settings):
    settings.DURABLE_NOTIFY_RETRY_SECONDS = 10
    webhook.answers = [500, 503]
    row = one_delivery("webhook")
    before = timezone.now()
    assert delivery.deliver(row.id) == 10
    row.refresh_from_db()
    assert row.status == Status.PENDING and "HTTP 500" in row.last_error
    assert row.next_attempt_at >= before + timedelta(seconds=10)
    assert delivery.deliver(row.id) is None  # not due yet: nothing is sent early
    make_due(row)
    assert delivery.deliver(row.id) == 20
    make_due(row)
    assert delivery.deliver(row.id) is None
    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_error) == (Status.SENT, 3, "")
    assert attempts(row) == [(1, "retry", 500), (2, "retry", 503), (3, "sent", 200)]
    assert len(webhook.requests) == 3 and webhook.processed == {str(row.id): 1}


def test_a_delivery_fails_after_its_last_attempt_and_says_why(webhook, settings):
    settings.DURABLE_NOTIFY_MAX_ATTEMPTS = 2
    webhook.answers = [502, 502]
    row = one_delivery("webhook")
    delivery.deliver(row.id)
    make_due(row)
    assert delivery.deliver(row.id) is None
    row.refresh_from_db()
    assert row.status == Status.FAILED and "HTTP 502" in row.last_error
    assert attempts(row) == [(1, "retry", 502), (2, "failed", 502)]



def test_a_webhook_error_body_the_database_cannot_store_is_recorded_repaired(webhook):
    webhook.answers, webhook.bodies = [400], ["bad \x00 request \ud800".encode("utf-8", "surrogatepass")]
    row = one_delivery("webhook")
    assert delivery.deliver(row.id) is None
    row.refresh_from_db()
    assert row.status == Status.FAILED and attempts(row) == [(1, "failed", 400)]
    assert "\x00" not in row.last_error and row.last_error.startswith("invalid_request: HTTP 400 bad \ufffd request")

def test_a_webhook_refused_with_a_4xx_fails_at_once(webhook):
    webhook.answers = [410]
    row = one_delivery("webhook")
    assert delivery.deliver(row.id) is None
    row.refresh_from_db()
    assert row.status == Status.FAILED and attempts(row) == [(1, "failed", 410)]


def test_an_email_goes_through_django_s_backend_with_the_delivery_id_as_its_message_id(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    row = one_delivery("email", EventKind.APPROVAL_REQUESTED)
    delivery.deliver(row.id)
    [message] = mail.outbox
    assert message.to == ["ann@example.com"]
    assert message.subject == "[durable] An approval is requested: ORD-1001"
    assert message.extra_headers["Message-ID"] == f"<{row.id}@durable.notifications>"
    assert message.extra_headers["Durable-Delivery-Id"] == str(row.id)
    assert "card declined" in message.body


def test_a_duplicate_message_for_a_sent_delivery_sends_nothing(webhook):
    row = one_delivery("webhook")
    delivery.deliver(row.id)
    assert delivery.deliver(row.id) is None
    assert len(webhook.requests) == 1 and attempts(row) == [(1, "sent", 200)]


def test_a_sender_whose_lease_ran_out_cannot_record_over_the_one_that_took_it(webhook):
    row = one_delivery("webhook")
    first = delivery.claim(row.id)
    assert delivery.claim(row.id) is None  # held: nobody else sends meanwhile
    NotificationDelivery.objects.filter(id=row.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    second = delivery.claim(row.id)  # the first sender stalled past its lease
    assert second is not None and second.token == first.token + 1
    delivery.record(first, delivery.Result(False, retryable=True, error="late"))
    row.refresh_from_db()
    assert (row.status, row.fencing_token) == (Status.SENDING, second.token)  # the late answer changed nothing
    assert attempts(row) == [(1, "retry", None), (2, "", None)]
