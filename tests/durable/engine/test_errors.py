import httpx
import pytest

from durable.engine.errors import (
    ActivityError,
    Classification,
    NeedsAttention,
    NonRetryableError,
    NotStorable,
    RetryableError,
    classify,
    classify_status,
    refuse_unstorable,
)
from durable.engine.json_values import check_storable


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


@pytest.mark.parametrize("text", ["card \x00declined", "an LLM wrote \ud800", "\udfff\x00"])
def test_an_error_text_the_database_cannot_store_is_classified_repaired(text):
    # A failure must always be recordable: the run's error, the ledger's last error, the evidence.
    verdict = classify(ValueError(text))
    assert verdict.message == text.replace("\x00", "\ufffd").replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
    check_storable(verdict.as_json())
    own = Classification(False, "declined\x00", "by the adapter \ud800", "adapter.Error\x00")
    assert (own.kind, own.message, own.error_type) == ("declined\ufffd", "by the adapter \ufffd", "adapter.Error\ufffd")


def test_a_clean_error_text_is_kept_as_it_is():
    text = "card declined"
    assert classify(NonRetryableError(text)).message is text


def test_needs_attention_says_what_it_can_store():
    exc = NeedsAttention("operation 1 (charge for B-\x00) is UNKNOWN", operation_id="1")
    assert str(exc) == "operation 1 (charge for B-\ufffd) is UNKNOWN"


def test_an_unstorable_value_is_refused_naming_whose_it_is_and_where():
    with pytest.raises(NotStorable) as refused:
        refuse_unstorable({"plan": [{"summary": "ok"}, {"summary": "\x00"}]}, what="state after step 'plan'",
                          kind="state_not_storable")
    assert str(refused.value) == ("state after step 'plan' cannot be stored: "
                                  "field plan[1].summary must not contain NUL (\\u0000) characters")
    assert (refused.value.kind, refused.value.retryable, refused.value.path) == (
        "state_not_storable", False, ("plan", 1, "summary"))
    refuse_unstorable({"plan": "fine"}, what="state", kind="state_not_storable")  # no refusal
