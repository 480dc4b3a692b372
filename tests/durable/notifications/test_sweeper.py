"""The sweeper's part: the database says what must be sent; a lost message is re-sent, once a grace period."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from durable.engine.notifications import EventKind
from durable.models import NotificationDelivery, NotificationEvent
from durable.notifications import fanout, queueing
from durable.notifications.sweeper import sweep
from durable.roles import ADMIN
from tests.durable.notifications.conftest import a_run, emit, subscriber

pytestmark = pytest.mark.django_db
Status = NotificationDelivery.Status


@pytest.fixture
def sent(monkeypatch):
    """Delivery ids handed to the broker, captured instead of sent."""
    ids: list[str] = []
    monkeypatch.setattr(queueing, "deliver", lambda delivery_id, **_: ids.append(str(delivery_id)))
    return ids


def long_ago(**fields) -> None:
    then = timezone.now() - timedelta(minutes=5)
    NotificationDelivery.objects.update(**{name: then for name in fields})


def test_an_event_whose_fan_out_message_was_lost_is_fanned_out_by_the_sweeper(
        sent, django_capture_on_commit_callbacks):
    subscriber("ann", ADMIN)
    event = emit(EventKind.RUN_FAILED, a_run())
    NotificationEvent.objects.filter(id=event.id).update(occurred_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=True):
        assert sweep().fanned_out == 1
    [delivery] = NotificationDelivery.objects.filter(event=event)
    assert sent == [str(delivery.id)]
    assert sweep().fanned_out == 0


def test_a_due_delivery_whose_message_was_lost_is_sent_again_once_per_grace_period(sent, settings):
    settings.DURABLE_PENDING_GRACE_SECONDS = 10
    subscriber("ann", ADMIN)
    [delivery_id] = fanout.fan_out(emit(EventKind.RUN_FAILED, a_run()).id)
    sent.clear()
    assert sweep().resent == 0  # just enqueued by the fan-out: its message may still be on its way
    long_ago(enqueued_at=True)
    assert sweep().resent == 1 and sent == [str(delivery_id)]
    assert sweep().resent == 0  # not again until another grace period has passed


def test_a_delivery_whose_sender_died_is_sent_again_after_its_lease(sent):
    subscriber("ann", ADMIN)
    [delivery_id] = fanout.fan_out(emit(EventKind.RUN_FAILED, a_run()).id)
    NotificationDelivery.objects.update(status=Status.SENDING, lease_expires_at=timezone.now() + timedelta(seconds=30))
    long_ago(enqueued_at=True)
    assert sweep().resent == 0  # its sender may still be in flight
    long_ago(enqueued_at=True, lease_expires_at=True)
    assert sweep().resent == 1 and sent[-1] == str(delivery_id)


def test_sent_and_failed_deliveries_are_left_alone(sent):
    subscriber("ann", ADMIN)
    fanout.fan_out(emit(EventKind.RUN_FAILED, a_run()).id)
    fanout.fan_out(emit(EventKind.RUN_FAILED, a_run()).id)
    first, second = NotificationDelivery.objects.all()
    NotificationDelivery.objects.filter(id=first.id).update(status=Status.SENT)
    NotificationDelivery.objects.filter(id=second.id).update(status=Status.FAILED)
    long_ago(enqueued_at=True, next_attempt_at=True)
    assert sweep().resent == 0
