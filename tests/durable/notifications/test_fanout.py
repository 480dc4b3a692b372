"""From an event to deliveries: only those who asked, may act on it and can be reached; once; a digest under a storm."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from durable.engine.notifications import EventKind, window_start
from durable.models import NotificationDelivery
from durable.notifications import delivery, fanout
from durable.roles import ADMIN, APPROVER, OPERATOR, RECONCILER, VIEWER
from tests.durable.notifications.conftest import a_run, emit, subscriber

pytestmark = pytest.mark.django_db
Status = NotificationDelivery.Status


def recipients(event) -> list[tuple[str, str, str]]:
    return sorted(NotificationDelivery.objects.filter(event=event).values_list("user__username", "channel", "status"))


def test_preferences_and_roles_choose_who_is_told_and_how(webhook):
    subscriber("ann", APPROVER, channels=("email", "webhook"))
    subscriber("bob", APPROVER, events=[EventKind.RUN_FAILED])  # asked for something else
    subscriber("cid", VIEWER)  # asked for everything but may decide nothing
    subscriber("dee", APPROVER, email="")  # email only, and no address
    subscriber("eve", RECONCILER, channels=("webhook",))
    subscriber("fay", OPERATOR)
    event = emit(EventKind.APPROVAL_REQUESTED, a_run(), subject="request-1", business_key="ORD-1")
    assert fanout.fan_out(event.id) != []
    assert recipients(event) == [("ann", "email", Status.PENDING), ("ann", "webhook", Status.PENDING)]

    unknown = emit(EventKind.OPERATION_UNKNOWN, a_run(), subject="op-1")
    fanout.fan_out(unknown.id)
    assert recipients(unknown) == [("eve", "webhook", Status.PENDING)]
    failed = emit(EventKind.RUN_FAILED, a_run())
    fanout.fan_out(failed.id)
    assert recipients(failed) == [("fay", "email", Status.PENDING)]  # bob asked, but may not retry runs
    over_budget = emit(EventKind.RUN_OVER_BUDGET, a_run())
    fanout.fan_out(over_budget.id)
    assert recipients(over_budget) == [("fay", "email", Status.PENDING)]  # who may raise it; eve resolves, cannot


def test_no_webhook_endpoint_set_means_no_webhook_delivery(settings):
    settings.DURABLE_NOTIFY_WEBHOOK_URL = ""
    subscriber("ann", ADMIN, channels=("email", "webhook"))
    event = emit(EventKind.RUN_FAILED, a_run())
    fanout.fan_out(event.id)
    assert recipients(event) == [("ann", "email", Status.PENDING)]


def test_an_event_is_fanned_out_once_however_often_it_is_asked():
    subscriber("ann", ADMIN)
    event = emit(EventKind.RUN_FAILED, a_run())
    [first] = fanout.fan_out(event.id)
    assert fanout.fan_out(event.id) == []
    assert list(NotificationDelivery.objects.values_list("id", flat=True)) == [first]


def test_a_storm_sends_the_first_messages_and_one_digest_of_the_rest_at_the_window_end(settings):
    settings.DURABLE_NOTIFY_DIGEST_AFTER = 3
    settings.DURABLE_NOTIFY_DIGEST_WINDOW_SECONDS = 3600
    ann = subscriber("ann", ADMIN)
    storm = [emit(EventKind.RUN_FAILED, a_run(f"ORD-{i}"), business_key=f"ORD-{i}") for i in range(10)]
    for event in storm:
        fanout.fan_out(event.id)
    alone = NotificationDelivery.objects.filter(user=ann, status=Status.PENDING)
    held = NotificationDelivery.objects.filter(user=ann, status=Status.HELD)
    assert alone.count() == 3 and held.count() == 7
    window_end = window_start(timezone.now(), 3600) + timedelta(seconds=3600)
    assert set(held.values_list("next_attempt_at", flat=True)) == {window_end}

    assert fanout.collect_digests(window_end - timedelta(seconds=1)) == []  # the window is still open
    [digest_id] = fanout.collect_digests(window_end)
    assert fanout.collect_digests(window_end) == []  # one digest, however often the sweeper looks
    digest = NotificationDelivery.objects.get(id=digest_id)
    assert digest.event is None and digest.carried.count() == 7
    assert NotificationDelivery.objects.filter(status=Status.DIGESTED, digest=digest).count() == 7

    assert delivery.deliver(digest_id) is None
    [message] = mail.outbox
    assert message.subject == "[durable] 7 notifications (digest)" and message.to == ["ann@example.com"]
    assert all(f"ORD-{i}" in message.body for i in range(3, 10))
    assert not any(f"ORD-{i}\n" in message.body for i in range(3))  # the first three went out on their own
