"""durable.E020: a webhook endpoint is set without the secret its signature needs."""
from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from durable.conf import durable_settings


@register("durable")
def webhook_has_a_secret(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_webhook(durable_settings.DURABLE_NOTIFY_WEBHOOK_URL, durable_settings.DURABLE_NOTIFY_WEBHOOK_SECRET)


def check_webhook(url: str, secret: str) -> list[CheckMessage]:
    if not url or len(secret) >= 16:
        return []
    return [Error("DURABLE_NOTIFY_WEBHOOK_URL is set but DURABLE_NOTIFY_WEBHOOK_SECRET is shorter than 16 characters: "
                  "the receiver could not tell durable's notifications from anyone's.",
                  hint="Set DURABLE_NOTIFY_WEBHOOK_SECRET to a long random string the receiver also holds "
                       "(docs/notifications.md#signature).", obj="DURABLE_NOTIFY_WEBHOOK_SECRET", id="durable.E020")]
