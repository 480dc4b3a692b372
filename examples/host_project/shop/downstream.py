"""The shop's refunds service, as durable's downstream adapters see it.

Orders are read; refunds honour the Idempotency-Key (re-sending one never refunds twice); customer
notices neither take keys nor can be looked up, so a notice whose answer was lost is UNKNOWN and
an operator settles it in the console.
"""
from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings

from durable import Capabilities, Classification, DownstreamOutcome, NonRetryableError, classify, register_downstream

CLIENT_RETRIES = 0  # durable owns retries; the client never repeats a request by itself


def _client() -> httpx.Client:
    return httpx.Client(base_url=settings.SHOP_DOWNSTREAM_URL, timeout=settings.SHOP_DOWNSTREAM_TIMEOUT_SECONDS,
                        transport=httpx.HTTPTransport(retries=CLIENT_RETRIES))


def get_order(order_id: str) -> dict[str, Any]:
    with _client() as client:
        response = client.get(f"/orders/{order_id}")
    if response.status_code == 404:
        raise NonRetryableError(f"order {order_id} does not exist", kind="business_rejection")
    response.raise_for_status()
    return response.json()


def _post(path: str, operation_id: str, body: dict[str, Any]) -> dict[str, Any]:
    with _client() as client:
        response = client.post(path, json=body, headers={"Idempotency-Key": operation_id})
    response.raise_for_status()  # an answer, even 4xx/5xx, says it did not happen
    return response.json()


class ShopAdapter:
    client_retries = CLIENT_RETRIES

    def classify(self, exc: BaseException) -> Classification:
        # The service answers with plain HTTP statuses: 429, 5xx and timeouts are worth retrying, other 4xx not.
        return classify(exc)


class Refunds(ShopAdapter):
    name = "shop-refunds"
    capabilities = Capabilities(honours_idempotency_keys=True, can_lookup=False)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        refund = _post("/refunds", operation_id, payload)
        return DownstreamOutcome(refund["refund_id"], refund)

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("refunds are settled by re-sending the same Idempotency-Key")


class Notices(ShopAdapter):
    name = "shop-notices"
    capabilities = Capabilities(honours_idempotency_keys=False, can_lookup=False, unknown_on_crash=True)

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        notice = _post("/notices", operation_id, {**payload, "order_id": business_key})
        return DownstreamOutcome(notice["notice_id"], notice)

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("notices cannot be looked up")


refunds = register_downstream(Refunds())
notices = register_downstream(Notices())
