"""durable.E020: a webhook endpoint needs a secret a receiver can check signatures with."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from durable.notifications.checks import check_webhook


def test_a_webhook_without_a_long_secret_is_an_error_naming_the_setting():
    [error] = check_webhook("https://hooks.example.com/durable", "short")
    assert (error.id, error.obj) == ("durable.E020", "DURABLE_NOTIFY_WEBHOOK_SECRET")
    assert check_webhook("https://hooks.example.com/durable", "s" * 16) == []
    assert check_webhook("", "") == []  # no webhook, nothing to sign


def test_the_check_runs_with_the_project_s_checks(settings):
    settings.DURABLE_NOTIFY_WEBHOOK_URL = "https://hooks.example.com/durable"
    settings.DURABLE_NOTIFY_WEBHOOK_SECRET = ""
    with pytest.raises(SystemCheckError, match="durable.E020"):
        call_command("check", tags=["durable"])
