"""What the OpenAI Agents SDK's errors (and the OpenAI client's) mean to durable's one retry owner.

durable's executor reads `retryable`, `kind` and `retry_after` off an `ActivityError`; `durable_error` turns the
SDK's and the client's errors into one, once, where the agent run ends.
"""
from __future__ import annotations

import openai
from agents.exceptions import (
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    ModelBehaviorError,
    ModelRefusalError,
    ModelTimeoutError,
    OutputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailTripwireTriggered,
    UserError,
)

from durable.engine.errors import ActivityError, DurableError, NonRetryableError, RetryableError, classify_status

# Checked in this order: the first class an error is an instance of decides (subclasses before their bases).
_RETRYABLE: tuple[tuple[type[Exception], str], ...] = (
    (openai.APITimeoutError, "timeout"),  # a model request has no side effect to double
    (openai.APIConnectionError, "network"),
    (ModelTimeoutError, "timeout"),
    (ModelBehaviorError, "invalid_model_response"),  # another sample may well be whole
)
_NOT_RETRYABLE: tuple[tuple[type[Exception], str], ...] = (
    (ModelRefusalError, "content_policy_refusal"),  # the same request is refused the same way
    (MaxTurnsExceeded, "usage_limit_exceeded"),  # the run's own bound on turns: never loops on
    (InputGuardrailTripwireTriggered, "guardrail_tripped"),
    (OutputGuardrailTripwireTriggered, "guardrail_tripped"),
    (ToolInputGuardrailTripwireTriggered, "guardrail_tripped"),
    (ToolOutputGuardrailTripwireTriggered, "guardrail_tripped"),
    (UserError, "invalid_request"),  # the agent is set up wrong: no retry mends it
)


def durable_error(exc: BaseException) -> BaseException:
    """The error a step raises for `exc`: durable's own errors as they are, the SDK's and the client's classified."""
    if isinstance(exc, (DurableError, ActivityError)) or not isinstance(exc, Exception):
        return exc
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, openai.APIStatusError):  # 429 and 5xx retried, no sooner than the provider's Retry-After
        ok, kind = classify_status(exc.status_code)
        return RetryableError(message, kind=kind, retry_after=_retry_after(exc)) if ok else NonRetryableError(
            message, kind=kind)
    for retryable, kind in _RETRYABLE:
        if isinstance(exc, retryable):
            return RetryableError(message, kind=kind)
    for refused, kind in _NOT_RETRYABLE:
        if isinstance(exc, refused):
            return NonRetryableError(message, kind=kind)
    return exc  # anything else (a tool's own error) durable's rules classify as it is


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
