"""What the OpenAI Agents SDK's and the OpenAI client's errors mean to durable's retry policy (no database)."""
import httpx
import openai
import pytest
from agents.exceptions import MaxTurnsExceeded, ModelBehaviorError, UserError

from durable.agents.openai_agents import durable_error
from durable.engine.errors import NonRetryableError, RetryableError


def status_error(status: int, **headers: str) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://model.test/v1/responses")
    response = httpx.Response(status, headers=headers, request=request)
    return openai.APIStatusError(f"HTTP {status}", response=response, body=None)


def test_a_rate_limited_request_is_retried_no_sooner_than_the_providers_retry_after():
    error = durable_error(status_error(429, **{"retry-after": "7"}))
    assert isinstance(error, RetryableError) and (error.kind, error.retry_after) == ("rate_limited", 7.0)


@pytest.mark.parametrize("status, retryable", [(500, True), (503, True), (400, False), (401, False)])
def test_a_status_is_read_as_durable_reads_any_downstreams(status, retryable):
    assert durable_error(status_error(status)).retryable is retryable


@pytest.mark.parametrize("error, kind, retryable", [
    (openai.APITimeoutError(httpx.Request("POST", "http://model.test")), "timeout", True),
    (ModelBehaviorError("bad JSON"), "invalid_model_response", True),
    (MaxTurnsExceeded("Max turns (20) exceeded"), "usage_limit_exceeded", False),
    (UserError("no model"), "invalid_request", False),
])
def test_the_sdks_own_errors_are_classified(error, kind, retryable):
    classified = durable_error(error)
    assert (classified.kind, classified.retryable) == (kind, retryable)


def test_durables_own_errors_and_a_tools_own_error_pass_as_they_are():
    mine, tools = NonRetryableError("no", kind="approval_not_declared"), KeyError("order")
    assert durable_error(mine) is mine and durable_error(tools) is tools
