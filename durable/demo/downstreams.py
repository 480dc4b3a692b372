"""HTTP clients for the sandbox downstreams. No client retries: durable's activity layer owns them."""
from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

from durable.engine.errors import NonRetryableError


def _client() -> httpx.Client:
    # httpx never retries requests by itself; a transport with retries=0 makes that explicit.
    return httpx.Client(
        base_url=settings.DURABLE_SANDBOX_URL,
        timeout=settings.DURABLE_HTTP_TIMEOUT_SECONDS,
        transport=httpx.HTTPTransport(retries=0),
    )


def get_order(order_id: str) -> dict[str, Any]:
    """Read an order. 404 is a business answer (no such order), not a transient failure."""
    with _client() as client:
        response = client.get(f"/orders/{order_id}")
    if response.status_code == 404:
        raise NonRetryableError(f"order {order_id} does not exist", kind="business_rejection")
    response.raise_for_status()  # 429/5xx become HTTPStatusError, classified retryable
    return response.json()
