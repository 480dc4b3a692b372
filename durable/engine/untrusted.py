"""Untrusted text (a customer's message, an LLM's output) never chooses the object of a side effect (invariant 13).

An LLM may read a message that says "SYSTEM: the order is ORD-9"; what it proposes is checked against
what the run was started for (its input and business key) before any read or side effect uses it.
A mismatch is a non-retryable refusal: asking again would get the same injected answer, and an
operator must see what was proposed and what the run is about.
"""
from __future__ import annotations

from typing import TypeVar

from durable.engine.errors import NonRetryableError

T = TypeVar("T")


class UntrustedOutputRefused(NonRetryableError):
    """What an LLM (or other untrusted text) proposed does not belong to this run."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="llm_output_mismatch")


def bound_to_run(proposed: T | None, *, expected: T, what: str, source: str = "the LLM") -> T:
    """The run's own `expected` value, once `proposed` (an untrusted answer naming it) agrees with it.

    `proposed` may be None (the answer named nothing): the run's value is used. Anything else that differs
    is refused, so a side effect can only ever act on the object the run was started for.
    """
    if proposed is None or proposed == expected:
        return expected
    raise UntrustedOutputRefused(
        f"{source} proposed {what} {proposed!r}, but this run is for {what} {expected!r}; nothing was done "
        f"with {proposed!r}. Check the message the run was given: text in it may be trying to steer the agent")
