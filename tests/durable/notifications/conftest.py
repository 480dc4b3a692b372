"""Fixtures for notifications: subscribers with real roles and preferences, events sent as the core sends them,
and a webhook receiver over real HTTP."""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import transaction

from durable import services
from durable.engine.notifications import EventKind
from durable.models import NotificationEvent, NotificationPreference, Run
from durable.signals import operator_event
from tests.conftest import user_with_roles
from tests.durable.notifications.receiver import Receiver

SECRET = "a-long-shared-webhook-secret"


def subscriber(username: str, *roles: str, events: list[str] | None = None, channels: tuple[str, ...] = ("email",),
               email: str | None = None) -> Any:
    """A user with `roles` who asked for `events` (all by default) on `channels`."""
    user = user_with_roles(username, *roles)
    user.email = f"{username}@example.com" if email is None else email
    user.save()
    NotificationPreference.objects.create(user=user, events=events or [kind.value for kind in EventKind],
                                          channels=list(channels))
    return user


def a_run(key: str = "") -> Run:
    run, _ = services.start_run(workflow="test-trivial", business_key=key or f"n-{uuid.uuid4().hex[:8]}", input={})
    return run


def emit(kind: EventKind, run: Run, *, subject: str = "", occurrence: Any = "", **detail: Any) -> NotificationEvent:
    """The event as a state change sends it: inside a transaction, through durable.signals."""
    with transaction.atomic():
        operator_event.send(emit, kind=kind, run_id=run.id, subject=subject or None, occurrence=occurrence,
                            detail=detail)
    return NotificationEvent.objects.get(kind=kind, subject=subject or str(run.id), key__endswith=f":{occurrence}")


@pytest.fixture
def receiver():
    with Receiver(SECRET) as running:
        yield running


@pytest.fixture
def webhook(receiver, settings):
    settings.DURABLE_NOTIFY_WEBHOOK_URL = receiver.url
    settings.DURABLE_NOTIFY_WEBHOOK_SECRET = SECRET
    return receiver
