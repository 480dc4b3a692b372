"""Thread-safe in-memory state of the sandbox: orders, refunds, tickets, notifications, counters and faults."""

from __future__ import annotations

import copy
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

SERVICES: tuple[str, ...] = ("orders", "payments", "tickets", "notifications", "llm")
# "hang" waits hang_seconds and closes without answering; "slow" waits as long, then serves the call
# (its effect happens as it answers: a lookup made meanwhile finds nothing).
FAULT_MODES: tuple[str, ...] = ("429", "503", "hang", "drop_after_success", "slow")

SEED_ORDERS: tuple[dict[str, str], ...] = (
    {"order_id": "ORD-1001", "customer": "Ada Lovelace", "amount": "120.00", "currency": "EUR"},
    {"order_id": "ORD-1002", "customer": "Grace Hopper", "amount": "1450.00", "currency": "EUR"},
    {"order_id": "ORD-1003", "customer": "Alan Turing", "amount": "35.50", "currency": "EUR"},
    # The support agent's demo order (durable/tools/demo/support_agent.py): on its way, not yet delivered.
    {"order_id": "ORD-1004", "customer": "Barbara Liskov", "amount": "89.90", "currency": "EUR", "status": "shipped"},
    # A refund asked for without a reason: the support agent asks the customer and waits for the reply; above
    # 100 EUR, a fraud-check child run scores it first.
    {"order_id": "ORD-1005", "customer": "Edsger Dijkstra", "amount": "240.00", "currency": "EUR"},
)

_CENTS = Decimal("0.01")


class SandboxError(Exception):
    """A request the sandbox refuses; carries the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def money(value: Any, field_name: str = "amount") -> str:
    """Normalise a decimal amount (string or number) to a two-decimal string such as "120.00"."""
    # bool is an int subclass: reject it explicitly so `true` is not refunded as 1.00.
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SandboxError(400, f"{field_name} must be a decimal string or number")
    try:
        amount = Decimal(str(value)).quantize(_CENTS)
    except InvalidOperation:
        raise SandboxError(400, f"{field_name} must be a decimal string or number") from None
    if not amount.is_finite():
        raise SandboxError(400, f"{field_name} must be finite")
    return str(amount)


def require_text(payload: dict[str, Any], name: str) -> str:
    """Return payload[name] if it is a non-empty string, else refuse the request with 400."""
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise SandboxError(400, f"{name} is required and must be a non-empty string")
    return value


def _fingerprint(payload: dict[str, Any]) -> str:
    # Canonical JSON so key order or whitespace never makes two equal bodies look different.
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _increment(counter: dict[str, int], key: str | None) -> None:
    if key is not None:
        counter[key] = counter.get(key, 0) + 1


@dataclass
class ServiceCounters:
    """How often one service was called, and how many business effects those calls produced."""

    calls: int = 0
    calls_by_key: dict[str, int] = field(default_factory=dict)
    calls_by_business_key: dict[str, int] = field(default_factory=dict)
    effects: int = 0
    effects_by_key: dict[str, int] = field(default_factory=dict)
    effects_by_business_key: dict[str, int] = field(default_factory=dict)

    def record_call(self, key: str | None, business_key: str | None) -> None:
        self.calls += 1
        _increment(self.calls_by_key, key)
        _increment(self.calls_by_business_key, business_key)

    def record_effect(self, key: str | None, business_key: str | None) -> None:
        self.effects += 1
        _increment(self.effects_by_key, key)
        _increment(self.effects_by_business_key, business_key)

    def snapshot(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "calls_by_key": dict(self.calls_by_key),
            "calls_by_business_key": dict(self.calls_by_business_key),
            "effects": self.effects,
            "effects_by_key": dict(self.effects_by_key),
            "effects_by_business_key": dict(self.effects_by_business_key),
        }


def _new_order(fields: dict[str, Any]) -> dict[str, str]:
    order = {
        "order_id": require_text(fields, "order_id"),
        "customer": str(fields.get("customer", "")),
        "amount": money(fields.get("amount", "0.00")),
        "currency": str(fields.get("currency", "EUR")),
        "status": str(fields.get("status", "paid")),
        "refunded_amount": money(fields.get("refunded_amount", "0.00"), "refunded_amount"),
    }
    return order


class SandboxState:
    """All sandbox data behind one re-entrant lock, so check-then-act sequences are atomic across threads."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        """Forget every refund, ticket, notification, counter and fault; re-seed the demo orders."""
        with self._lock:
            self.retry_after = "1"  # the Retry-After header a "429" fault answers with
            self._orders: dict[str, dict[str, str]] = {o["order_id"]: _new_order(o) for o in SEED_ORDERS}
            self._refunds: list[dict[str, Any]] = []
            # Idempotency-Key -> (fingerprint of the first request, the refund it created).
            self._refunds_by_key: dict[str, tuple[str, dict[str, Any]]] = {}
            self._tickets: list[dict[str, Any]] = []
            self._notifications: list[dict[str, Any]] = []
            self._counters = {service: ServiceCounters() for service in SERVICES}
            self._faults: dict[str, deque[str]] = {service: deque() for service in SERVICES}
            self._sequences: dict[str, int] = {}

    def next_sequence(self, kind: str) -> int:
        """Return 1, 2, 3... per kind; ids restart after reset() so demo runs are reproducible."""
        with self._lock:
            self._sequences[kind] = self._sequences.get(kind, 0) + 1
            return self._sequences[kind]

    # -- orders ---------------------------------------------------------

    def get_order(self, order_id: str) -> dict[str, str] | None:
        with self._lock:
            order = self._orders.get(order_id)
            return dict(order) if order is not None else None

    def list_orders(self) -> list[dict[str, str]]:
        with self._lock:
            return [dict(order) for order in self._orders.values()]

    def upsert_order(self, fields: dict[str, Any]) -> dict[str, str]:
        """Create or partially update an order; fields not given keep their current (or default) value."""
        order_id = require_text(fields, "order_id")
        with self._lock:
            merged = {**self._orders.get(order_id, {}), **fields}
            self._orders[order_id] = _new_order(merged)
            return dict(self._orders[order_id])

    # -- payments -------------------------------------------------------

    def create_refund(self, idempotency_key: str, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Refund once per Idempotency-Key; returns (refund, created) where created=False means a replay."""
        order_id = require_text(request, "order_id")
        amount = money(request.get("amount"))
        if Decimal(amount) <= 0:
            raise SandboxError(400, "amount must be positive")
        fingerprint = _fingerprint(request)
        # One lock around lookup-and-create: two concurrent retries with one key must yield one refund.
        with self._lock:
            stored = self._refunds_by_key.get(idempotency_key)
            if stored is not None:
                if stored[0] != fingerprint:
                    raise SandboxError(422, "Idempotency-Key reused with a different request")
                return copy.deepcopy(stored[1]), False
            order = self._orders.get(order_id)
            if order is None:
                raise SandboxError(404, "order not found")
            refund = {
                "refund_id": f"re_{self.next_sequence('refund')}",
                "order_id": order_id,
                "amount": amount,
                "currency": str(request.get("currency") or order["currency"]),
                "status": "succeeded",
                "idempotency_key": idempotency_key,
            }
            order["refunded_amount"] = str(Decimal(order["refunded_amount"]) + Decimal(amount))
            self._refunds.append(refund)
            self._refunds_by_key[idempotency_key] = (fingerprint, refund)
            self._counters["payments"].record_effect(idempotency_key, order_id)
            return copy.deepcopy(refund), True

    def list_refunds(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._refunds)

    # -- tickets --------------------------------------------------------

    def create_ticket(self, idempotency_key: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """Always open a new ticket: this service deliberately has no deduplication."""
        business_key = require_text(request, "business_key")
        subject = require_text(request, "subject")
        with self._lock:
            ticket = {
                "ticket_id": f"TCK-{self.next_sequence('ticket')}",
                "business_key": business_key,
                "subject": subject,
                "body": str(request.get("body") or ""),
                "status": "open",
            }
            self._tickets.append(ticket)
            self._counters["tickets"].record_effect(idempotency_key, business_key)
            return dict(ticket)

    def tickets_for(self, business_key: str) -> list[dict[str, Any]]:
        """All tickets opened for a business key, oldest first (creation order)."""
        with self._lock:
            return [dict(t) for t in self._tickets if t["business_key"] == business_key]

    def customer_tickets(self, order_id: str) -> tuple[str, list[dict[str, Any]]] | None:
        """The customer who placed an order and their tickets across all their orders, oldest first; None: no order."""
        with self._lock:
            order = self._orders.get(order_id)
            if order is None:
                return None
            theirs = {o["order_id"] for o in self._orders.values() if o["customer"] == order["customer"]}
            return order["customer"], [dict(t) for t in self._tickets if t["business_key"] in theirs]

    # -- notifications --------------------------------------------------

    def create_notification(self, idempotency_key: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """Send a notification; every call is a new effect and there is no way to look it up afterwards."""
        business_key = require_text(request, "business_key")
        to = require_text(request, "to")
        message = require_text(request, "message")
        with self._lock:
            notification = {
                "notification_id": f"ntf-{self.next_sequence('notification')}",
                "business_key": business_key,
                "to": to,
                "message": message,
                "status": "sent",
            }
            self._notifications.append(notification)
            self._counters["notifications"].record_effect(idempotency_key, business_key)
            return dict(notification)

    # -- counters -------------------------------------------------------

    def record_call(self, service: str, idempotency_key: str | None, business_key: str | None) -> None:
        with self._lock:
            self._counters[service].record_call(idempotency_key, business_key)

    def calls_snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {service: counters.snapshot() for service, counters in self._counters.items()}

    # -- faults ---------------------------------------------------------

    def arm_fault(self, service: str, mode: str, times: int = 1) -> None:
        """Make the next `times` calls of `service` fail with `mode`; queued after faults already armed."""
        if service not in SERVICES:
            raise SandboxError(400, f"service must be one of {list(SERVICES)}")
        if mode not in FAULT_MODES:
            raise SandboxError(400, f"mode must be one of {list(FAULT_MODES)}")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise SandboxError(400, "times must be a positive integer")
        with self._lock:
            self._faults[service].extend([mode] * times)

    def take_fault(self, service: str) -> str | None:
        """Consume and return the next armed fault of a service, or None if the call should behave normally."""
        with self._lock:
            queue = self._faults[service]
            return queue.popleft() if queue else None

    def clear_faults(self) -> None:
        with self._lock:
            for queue in self._faults.values():
                queue.clear()

    def faults_snapshot(self) -> dict[str, list[str]]:
        with self._lock:
            return {service: list(queue) for service, queue in self._faults.items()}

    # -- inspection -----------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything at once, consistent with itself (taken under one lock acquisition)."""
        with self._lock:
            return {
                "orders": self.list_orders(),
                "refunds": self.list_refunds(),
                "tickets": copy.deepcopy(self._tickets),
                "notifications": copy.deepcopy(self._notifications),
                "calls": self.calls_snapshot(),
                "faults": self.faults_snapshot(),
            }
