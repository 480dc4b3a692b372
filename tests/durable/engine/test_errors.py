import httpx
import pytest

from durable.engine.errors import ActivityError, NonRetryableError, RetryableError, classify, classify_status


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_rate_limits_and_transient_server_errors_are_retryable(status):
    assert classify_status(status)[0] is True


@pytest.mark.parametrize("status,kind", [(400, "invalid_request"), (401, "permission_denied"),
                                         (403, "permission_denied"), (404, "invalid_request"), (422, "invalid_request")])
def test_client_errors_are_not_retryable(status, kind):
    assert classify_status(status) == (False, kind)


def test_errors_carry_their_own_classification():
    assert classify(RetryableError("busy")).retryable is True
    verdict = classify(NonRetryableError("declined", kind="business_rejection"))
    assert (verdict.retryable, verdict.kind) == (False, "business_rejection")
    assert classify(ActivityError("policy", retryable=False, kind="content_policy")).kind == "content_policy"


def test_http_status_errors_classify_by_status():
    request = httpx.Request("GET", "http://x/")
    too_many = httpx.HTTPStatusError("429", request=request, response=httpx.Response(429, request=request))
    forbidden = httpx.HTTPStatusError("403", request=request, response=httpx.Response(403, request=request))
    assert classify(too_many).retryable is True
    assert classify(forbidden).retryable is False


def test_timeouts_and_network_errors_are_retryable_reads():
    assert classify(httpx.ReadTimeout("slow")).kind == "timeout"
    assert classify(httpx.ConnectError("refused")).kind == "network"
    assert classify(TimeoutError()).retryable is True


def test_unknown_exceptions_are_bugs_and_not_retried():
    verdict = classify(KeyError("amount"))
    assert (verdict.retryable, verdict.kind, verdict.error_type) == (False, "code_error", "builtins.KeyError")
