"""HTTP clients for the sandbox downstreams. No client retries: durable's activity layer owns them."""
from __future__ import annotations

from typing import Any

import httpx

from durable import Capabilities, Classification, DownstreamOutcome, NonRetryableError, classify, register_downstream
from durable.conf import durable_settings

# httpx never retries requests by itself, and its transport retries only failed connects; 0
# makes "durable's retry policy is the only one" explicit, and the adapters declare the same.
CLIENT_RETRIES = 0


def _client() -> httpx.Client:
    return httpx.Client(
        base_url=durable_settings.DURABLE_SANDBOX_URL,
        timeout=durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS,
        transport=httpx.HTTPTransport(retries=CLIENT_RETRIES),
    )


def _read_order(order_id: str, path: str = "") -> dict[str, Any]:
    """GET /orders/<id><path>. 404 is a business answer (no such order), not a transient failure."""
    with _client() as client:
        response = client.get(f"/orders/{order_id}{path}")
    if response.status_code == 404:
        raise NonRetryableError(f"order {order_id} does not exist", kind="business_rejection")
    response.raise_for_status()  # 429/5xx become HTTPStatusError, classified retryable
    return response.json()


def get_order(order_id: str) -> dict[str, Any]:
    """Read an order."""
    return _read_order(order_id)


def customer_tickets(order_id: str) -> dict[str, Any]:
    """The tickets of the customer who placed the order, across their orders: {"customer": ..., "tickets": [...]}."""
    return _read_order(order_id, "/tickets")


def _post(path: str, operation_id: str, body: dict[str, Any]) -> dict[str, Any]:
    # The Idempotency-Key goes to every downstream; only payments honours it. The others
    # ignore it (the sandbox still counts calls by it, so drills can see every duplicate).
    with _client() as client:
        response = client.post(path, json=body, headers={"Idempotency-Key": operation_id})
    response.raise_for_status()  # 4xx/5xx: the downstream answered, so it did not happen
    return response.json()


class SandboxAdapter:
    """What the sandbox adapters share: the client above, and errors classified by HTTP status."""

    client_retries = CLIENT_RETRIES

    def classify(self, exc: BaseException) -> Classification:
        # The sandboxes answer with plain HTTP statuses: 429/5xx and timeouts retryable, other 4xx not.
        return classify(exc)


class PaymentsAdapter(SandboxAdapter):
    """Refunds. Honours Idempotency-Key: re-sending the same key never refunds twice."""

    name = "payments"
    capabilities = Capabilities(honours_idempotency_keys=True, can_lookup=False)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        refund = _post("/payments/refunds", operation_id, payload)
        return DownstreamOutcome(refund["refund_id"], refund)

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("payments cannot be looked up; it honours idempotency keys instead")


class TicketsAdapter(SandboxAdapter):
    """Support tickets. Ignores keys, but tickets can be listed by business key."""

    name = "tickets"
    capabilities = Capabilities(honours_idempotency_keys=False, can_lookup=True)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        ticket = _post("/tickets", operation_id, self._body(operation_id, business_key, payload))
        return DownstreamOutcome(ticket["ticket_id"], ticket)

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        with _client() as client:
            response = client.get("/tickets", params={"business_key": business_key})
        response.raise_for_status()
        mine = [t for t in response.json()["tickets"] if self._marker(operation_id) in t["subject"]]
        return DownstreamOutcome(mine[0]["ticket_id"], mine[0]) if mine else None

    @staticmethod
    def _marker(operation_id: str) -> str:
        return f"[op:{operation_id}]"

    def _body(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> dict[str, Any]:
        # The operation id rides in the subject, so a lookup can tell this ticket from others of the order.
        return {**payload, "business_key": business_key, "subject": f"{payload['subject']} {self._marker(operation_id)}"}


class NotificationsAdapter(SandboxAdapter):
    """Customer notifications. Neither honours keys nor can be looked up: crashes here become UNKNOWN."""

    name = "notifications"
    capabilities = Capabilities(honours_idempotency_keys=False, can_lookup=False, unknown_on_crash=True)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        notification = _post("/notifications", operation_id, {**payload, "business_key": business_key})
        return DownstreamOutcome(notification["notification_id"], notification)

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("notifications cannot be looked up")


payments = register_downstream(PaymentsAdapter())
tickets = register_downstream(TicketsAdapter())
notifications = register_downstream(NotificationsAdapter())
