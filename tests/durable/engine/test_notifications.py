"""The webhook signature as a receiver checks it, the backoff, the digest window: pure rules."""
from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from durable.engine.notifications import retry_delay, signature_header, verify, window_start

SECRET = "whsec-test"
NOW = 1_800_000_000


def test_a_receiver_verifies_the_header_with_nothing_but_hmac_and_the_secret():
    body = b'{"delivery_id": "d-1"}'
    header = signature_header(SECRET, NOW, body)
    timestamp, v1 = (part.split("=", 1)[1] for part in header.split(","))
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert int(timestamp) == NOW and hmac.compare_digest(v1, expected)
    assert verify(SECRET, header, body, now=NOW + 10)


@given(body=st.binary(max_size=200), tampered=st.binary(min_size=1, max_size=200))
def test_a_changed_body_or_another_secret_does_not_verify(body, tampered):
    header = signature_header(SECRET, NOW, body)
    assert verify(SECRET, header, body, now=NOW)
    assert body == tampered or not verify(SECRET, header, tampered, now=NOW)
    assert not verify("another-secret", header, body, now=NOW)


def test_an_old_signature_is_refused_as_a_replay():
    body = b"{}"
    assert not verify(SECRET, signature_header(SECRET, NOW - 301, body), body, now=NOW)
    assert not verify(SECRET, "t=soon,v1=00", body, now=NOW) and not verify(SECRET, "", body, now=NOW)


def test_the_backoff_doubles_up_to_its_cap():
    assert [retry_delay(n, first=10) for n in (1, 2, 3, 4)] == [10, 20, 40, 80]
    assert retry_delay(30, first=10, cap=3600) == 3600


def test_the_digest_window_is_aligned_to_the_clock():
    at = datetime(2026, 12, 4, 17, 40, 12, tzinfo=UTC)
    assert window_start(at, 900) == datetime(2026, 12, 4, 17, 30, tzinfo=UTC)
    assert window_start(at, 3600) == datetime(2026, 12, 4, 17, 0, tzinfo=UTC)
