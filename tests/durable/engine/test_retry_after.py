"""A downstream's Retry-After sets the earliest next attempt, capped by the policy's maximum (item 19)."""
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.errors import Classification, RetryableError, classify, parse_retry_after, retry_after_of
from durable.engine.retry import RetryPolicy

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class Answer:
    def __init__(self, headers: dict[str, str], status_code: int = 429) -> None:
        self.headers, self.status_code = headers, status_code


class HTTPError(Exception):
    def __init__(self, headers: dict[str, str], status_code: int = 429) -> None:
        super().__init__(f"{status_code}")
        self.response = Answer(headers, status_code)


def test_delay_seconds_and_http_dates_are_read():
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after(" 120 ") == 120.0
    assert parse_retry_after(format_datetime(NOW + timedelta(seconds=90), usegmt=True), now=NOW) == 90.0
    assert parse_retry_after(format_datetime(NOW - timedelta(hours=1), usegmt=True), now=NOW) == 0.0


@given(st.text(max_size=40))
def test_garbage_never_raises_and_never_asks_for_a_negative_or_infinite_wait(value):
    seconds = parse_retry_after(value, now=NOW)
    assert seconds is None or 0 <= seconds < float("inf")


@given(st.integers(min_value=0, max_value=10**400))
def test_any_delay_seconds_is_honoured_up_to_the_policy_maximum(seconds):
    asked = parse_retry_after(str(seconds))
    policy = RetryPolicy(initial_interval=0.01, max_interval=300)
    delay = policy.delay(1, retry_after=asked)
    assert delay >= min(asked or 0, 300) and delay <= 300


@given(st.floats(min_value=0, max_value=1e6), st.integers(min_value=1, max_value=10))
def test_the_delay_is_never_sooner_than_retry_after_nor_later_than_the_maximum(asked, attempts):
    policy = RetryPolicy(initial_interval=0.5, max_interval=60)
    delay = policy.delay(attempts, retry_after=asked)
    assert min(asked, 60) <= delay <= 60 * 1.2


def test_the_attack_as_found_a_429_asking_one_second_is_not_retried_after_half_a_second():
    verdict = classify(HTTPError({"Retry-After": "1"}))
    assert (verdict.retryable, verdict.kind, verdict.retry_after) == (True, "rate_limited", 1.0)
    assert all(RetryPolicy(initial_interval=0.25).delay(1, retry_after=verdict.retry_after) >= 1.0 for _ in range(200))


def test_an_error_raised_from_an_answer_keeps_its_retry_after():
    try:
        try:
            raise HTTPError({"Retry-After": "7"})
        except HTTPError as exc:
            raise RetryableError("refund on payments: rate limited", kind="rate_limited") from exc
    except RetryableError as wrapped:
        assert retry_after_of(wrapped) == 7.0 and classify(wrapped).retry_after == 7.0
    assert classify(HTTPError({"Retry-After": "7"}, status_code=400)).retry_after is None  # not retried anyway


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 10 ** 400])
def test_a_retry_after_that_is_not_a_finite_number_says_nothing(seconds):
    # It would be recorded in the run's error, where Infinity cannot be stored; the policy's backoff decides.
    assert classify(RetryableError("busy", retry_after=seconds)).retry_after is None
    assert Classification(True, "busy", "busy", "x", retry_after=seconds).retry_after is None
