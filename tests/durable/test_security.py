"""The security log: every refused attempt leaves a row with who, from where and why, and a count."""
from __future__ import annotations

import pytest
from django.test import RequestFactory

from durable import metrics
from durable.models import AppendOnly, SecurityEvent
from durable.security import client_address, record_refusal
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_a_refusal_is_recorded_with_user_address_and_reason_and_counted():
    user = make_user("mallory")
    request = RequestFactory().post("/api/approvals/x/approve/", REMOTE_ADDR="203.0.113.9")
    before = metrics.value("refused_attempt_total", kind="forbidden", source="api")

    event = record_refusal(kind=SecurityEvent.Kind.FORBIDDEN, source="api", reason="no approver role",
                           request=request, user=user, action="approve", target="req-1")

    row = SecurityEvent.objects.get(pk=event.pk)
    assert (row.username, row.user_id_at_time, row.address) == ("mallory", str(user.pk), "203.0.113.9")
    assert (row.action, row.target, row.reason) == ("approve", "req-1", "no approver role")
    assert metrics.value("refused_attempt_total", kind="forbidden", source="api") == before + 1


def test_an_anonymous_attempt_keeps_the_name_it_gave():
    event = record_refusal(kind=SecurityEvent.Kind.LOGIN_FAILED, source="console", reason="wrong password",
                           username="ｌockme1")
    assert (event.username, event.user_id_at_time, event.address) == ("ｌockme1", "", None)


def test_security_log_rows_cannot_be_changed_or_removed():
    event = record_refusal(kind=SecurityEvent.Kind.LOGIN_FAILED, source="console", reason="x")
    with pytest.raises(AppendOnly):
        SecurityEvent.objects.filter(pk=event.pk).update(reason="nothing happened")
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        SecurityEvent.objects.all().delete()


def test_the_forwarded_address_is_trusted_only_behind_a_declared_proxy(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.7")
    settings.DURABLE_BEHIND_TLS_PROXY = False
    assert client_address(request) == "10.0.0.2"
    settings.DURABLE_BEHIND_TLS_PROXY = True
    assert client_address(request) == "198.51.100.7"  # the proxy's own hop, not what the client wrote first
    assert client_address(RequestFactory().get("/", REMOTE_ADDR="not-an-ip")) is None


def test_a_hostile_username_is_recorded_in_a_form_every_database_stores():
    event = record_refusal(kind=SecurityEvent.Kind.LOGIN_FAILED, source="console", reason="x\x00",
                           username="a\x00b\ud800c", target="\x00")
    row = SecurityEvent.objects.get(pk=event.pk)
    assert "\x00" not in row.username + row.reason + row.target and row.username.startswith("a\ufffdb")
