"""The notifications page: a user's own preferences (login and a console role required) and what was sent to them."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from durable.engine.notifications import EventKind
from durable.models import NotificationDelivery, NotificationPreference
from durable.notifications import fanout
from durable.roles import ADMIN, APPROVER
from tests.conftest import user_with_roles
from tests.durable.notifications.conftest import a_run, emit, subscriber

pytestmark = pytest.mark.django_db
URL = "/notifications/"


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_user_saves_which_events_and_channels_they_want(settings):
    settings.DURABLE_NOTIFY_WEBHOOK_URL = ""
    ann = user_with_roles("ann", APPROVER)
    ann.email = "ann@example.com"
    ann.save()
    page = browser(ann).get(URL)
    assert page.status_code == 200 and "Can reach you: Email." in page.content.decode()
    answer = browser(ann).post(URL, {"events": ["approval_requested", "approval_expiring"], "channels": ["email"]})
    assert answer.status_code == 302 and answer["Location"] == reverse("durable:notifications")
    saved = NotificationPreference.objects.get(user=ann)
    assert (saved.events, saved.channels) == (["approval_requested", "approval_expiring"], ["email"])
    assert browser(ann).get(URL).context["form"].initial == {"events": saved.events, "channels": ["email"]}


def test_a_channel_that_cannot_reach_the_user_is_a_400_naming_it_and_saves_nothing(settings):
    settings.DURABLE_NOTIFY_WEBHOOK_URL = ""
    ann = user_with_roles("ann", APPROVER)  # no email address
    answer = browser(ann).post(URL, {"events": ["approval_requested"], "channels": ["email", "webhook"]})
    assert answer.status_code == 400
    page = answer.content.decode()
    assert "Email, Webhook cannot reach you" in page and "Nothing was saved" in page
    assert not NotificationPreference.objects.exists()


def test_an_unknown_event_is_a_400_and_saves_nothing():
    ann = user_with_roles("ann", APPROVER)
    answer = browser(ann).post(URL, {"events": ["everything"]})
    assert answer.status_code == 400 and "everything is not one of the available choices" in answer.content.decode()
    assert not NotificationPreference.objects.exists()


def test_a_user_sees_their_own_deliveries_failed_first_and_no_one_else_s():
    ann = subscriber("ann", ADMIN)
    subscriber("bob", ADMIN)
    fanout.fan_out(emit(EventKind.RUN_FAILED, a_run("ORD-7"), business_key="ORD-7").id)
    fanout.fan_out(emit(EventKind.RUN_FAILED, a_run("ORD-8"), business_key="ORD-8").id)
    failed = NotificationDelivery.objects.get(user=ann, event__detail__business_key="ORD-8")
    NotificationDelivery.objects.filter(id=failed.id).update(status="FAILED", attempts=8,
                                                            last_error="transient_http: HTTP 503")
    page = browser(ann).get(URL).content.decode()
    assert page.index("ORD-8") < page.index("ORD-7")  # the failed one first
    assert "Failed" in page and "HTTP 503" in page and str(failed.id) in page
    bobs = NotificationDelivery.objects.filter(user__username="bob").values_list("id", flat=True)
    assert not any(str(delivery_id) in page for delivery_id in bobs)


def test_a_user_without_a_console_role_is_refused():
    assert browser(user_with_roles("nobody")).get(URL).status_code == 403
