"""What Pydantic AI's errors mean to durable's one retry owner: retryable or not, with the wait the provider asked.

Pydantic AI reports a provider's refusal in classes of its own (`ModelRateLimitError`, `ModelServerError`,
`ContentFilterError`...); durable's executor reads `retryable`, `kind` and `retry_after` off an `ActivityError`.
`durable_error` turns the first into the second, once, where the agent run ends.
"""
from __future__ import annotations

from pydantic_ai.exceptions import (
    ContentFilterError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelEmptyResponseError,
    ModelHTTPError,
    ModelInvalidResponseError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelRequestTimeout,
    ModelServerError,
    ModelUnavailableError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)

from durable.engine.errors import ActivityError, DurableError, NonRetryableError, RetryableError, classify_status

# Checked in this order: the first class an error is an instance of decides (subclasses before their bases).
_RETRYABLE: tuple[tuple[type[ModelAPIError], str], ...] = (
    (ModelRateLimitError, "rate_limited"),
    (ModelUnavailableError, "model_unavailable"),
    (ModelServerError, "transient_http"),
    (ModelConnectionError, "network"),  # its timeouts too: a model request has no side effect to double
    (ModelRequestTimeout, "timeout"),
    (ModelEmptyResponseError, "invalid_model_response"),  # another sample may well be whole
    (ModelInvalidResponseError, "invalid_model_response"),
)
_NOT_RETRYABLE: tuple[tuple[type[Exception], str], ...] = (
    (ContentFilterError, "content_policy_refusal"),  # the same request is refused the same way
    (ModelQuotaExceededError, "quota_exceeded"),  # waiting does not top the account up
    (ModelAuthenticationError, "permission_denied"),
    (ModelRequestRejectedError, "invalid_request"),  # context window, unknown model, schema too complex...
    (UsageLimitExceeded, "usage_limit_exceeded"),  # the run's own bound on requests or tokens: never loops on
    (UnexpectedModelBehavior, "unexpected_model_behavior"),  # e.g. output retries used up
)


def durable_error(exc: BaseException) -> BaseException:
    """The error a step raises for `exc`: durable's own errors as they are, Pydantic AI's classified."""
    if isinstance(exc, (DurableError, ActivityError)) or not isinstance(exc, Exception):
        return exc
    message = f"{type(exc).__name__}: {exc}"
    for retryable, kind in _RETRYABLE:
        if isinstance(exc, retryable):
            return RetryableError(message, kind=kind, retry_after=exc.retry_after)
    for refused, kind in _NOT_RETRYABLE:
        if isinstance(exc, refused):
            return NonRetryableError(message, kind=kind)
    if isinstance(exc, ModelHTTPError):  # a status no category above claimed
        ok, kind = classify_status(exc.status_code)
        return RetryableError(message, kind=kind, retry_after=exc.retry_after) if ok else NonRetryableError(
            message, kind=kind)
    return exc  # anything else (a tool's own error, an SDK's transport error) durable's rules classify as it is
