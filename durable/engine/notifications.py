"""Notification rules with no Django import: the events, the webhook signature, the backoff, the digest window."""
from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from enum import StrEnum

SIGNATURE_HEADER = "Durable-Signature"
DELIVERY_ID_HEADER = "Durable-Delivery-Id"


class EventKind(StrEnum):
    """What an operator may ask to be told of."""

    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_EXPIRING = "approval_expiring"
    APPROVAL_EXPIRED = "approval_expired"
    OPERATION_UNKNOWN = "operation_unknown"
    RUN_NEEDS_ATTENTION = "run_needs_attention"
    RUN_OVER_BUDGET = "run_over_budget"
    RUN_FAILED = "run_failed"

    @property
    def label(self) -> str:
        return LABELS[self]


LABELS = {
    EventKind.APPROVAL_REQUESTED: "An approval is requested",
    EventKind.APPROVAL_EXPIRING: "An approval is about to expire",
    EventKind.APPROVAL_EXPIRED: "An approval expired",
    EventKind.OPERATION_UNKNOWN: "An operation's outcome is UNKNOWN",
    EventKind.RUN_NEEDS_ATTENTION: "A run needs attention",
    EventKind.RUN_OVER_BUDGET: "A run stopped at its budget",
    EventKind.RUN_FAILED: "A run failed",
}


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """HMAC-SHA256 over "<timestamp>.<body>", hex: what the Durable-Signature header's v1 carries."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex>`, the shape Stripe's signature header has."""
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(secret: str, header: str, body: bytes, *, now: int, tolerance: int = 300) -> bool:
    """What a receiver checks: the signature matches the body and the timestamp is recent (no replay)."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance:
        return False
    return hmac.compare_digest(parts.get("v1", ""), signature(secret, timestamp, body))


def retry_delay(attempts_made: int, *, first: float, cap: float = 3600.0) -> float:
    """Seconds before the next attempt: `first`, then doubling, at most `cap`."""
    return min(first * 2.0 ** max(attempts_made - 1, 0), cap)


def window_start(now: datetime, seconds: float) -> datetime:
    """The start of the digest window `now` falls in: windows are aligned to the epoch, the same for every process."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    elapsed = (now - epoch).total_seconds()
    return epoch + timedelta(seconds=elapsed - elapsed % seconds)
