"""Errors and their classification: retryable or not, decided once (invariant 6, docs/invariants.md).

An error may carry its own classification (`ActivityError`), and a downstream adapter may classify its own
errors (`durable.downstream.classify_error`); everything else is classified by `classify` below.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from durable.engine.json_values import UnstorableJSON, check_storable, storable_text

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class DurableError(Exception):
    """Base of the errors durable raises itself."""


class ActivityError(DurableError):
    """An error raised by workflow code that carries its own classification.

    `ActivityError("card declined", retryable=False, kind="business_rejection")`
    """

    def __init__(self, message: str, *, retryable: bool, kind: str = "application",
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the downstream asked us to wait (Retry-After), if it said
        self.kind = kind


class RetryableError(ActivityError):
    def __init__(self, message: str, *, kind: str = "transient", retry_after: float | None = None) -> None:
        super().__init__(message, retryable=True, kind=kind, retry_after=retry_after)


class NonRetryableError(ActivityError):
    def __init__(self, message: str, *, kind: str = "non_retryable") -> None:
        super().__init__(message, retryable=False, kind=kind)


class NotStorable(NonRetryableError):
    """A value workflow code chose cannot be stored (durable.engine.json_values): refused before it is
    recorded or sent, and the run fails: running the step again would choose it again."""

    def __init__(self, what: str, problem: UnstorableJSON, *, kind: str) -> None:
        super().__init__(f"{what} cannot be stored: {problem.detail}", kind=kind)
        self.path = problem.path


def refuse_unstorable(value: Any, *, what: str, kind: str) -> None:
    """Raise NotStorable (`what` says whose value it is) unless the database can store `value`."""
    try:
        check_storable(value)
    except UnstorableJSON as problem:
        raise NotStorable(what, problem, kind=kind) from None


class ReplayContractViolation(DurableError):
    """Re-executed code asked for different recorded calls than history holds (invariant 5)."""


class UndeclaredRoute(NonRetryableError):
    """A step chose a route it did not declare (invariant 15): the code would choose it again, so the run fails."""

    def __init__(self, step: str, route: str | None, declared: tuple[str, ...]) -> None:
        allowed = f"it declares {', '.join(map(repr, declared))}" if declared else "it declares no route (it ends the run)"
        super().__init__(f"step {step!r} chose the route {route!r}, which it does not declare: {allowed}; "
                         f"add {route!r} to the step's next=[...] or choose a declared route", kind="undeclared_route")
        self.step, self.route, self.declared = step, route, declared


class RouteNotChosen(NonRetryableError):
    """A step that declares several routes returned a plain state: which route it takes is not said."""

    def __init__(self, step: str, declared: tuple[str, ...]) -> None:
        super().__init__(f"step {step!r} declares the routes {', '.join(map(repr, declared))} and returned a plain "
                         "state: return wf.goto(<route>, state) or wf.finish(state)", kind="route_not_chosen")
        self.step, self.declared = step, declared


class OperationConflict(ActivityError):
    """The same operation id was prepared again with a different request: refused, never sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, kind="operation_conflict")


class WrongThread(NonRetryableError):
    """ctx.activity, ctx.side_effect or ctx.request_approval called from a thread other than the step's.

    Calls are numbered in the order the step makes them; threads would number them in the order they
    happen to arrive, and a replay could then take another call's record (invariant 16).
    """

    def __init__(self, what: str, step: str, thread: str) -> None:
        super().__init__(
            f"ctx.{what} was called from thread {thread!r}, not from the thread running step {step!r}: calls "
            "made from other threads cannot be numbered in a replayable order. To run calls at once, use "
            "ctx.parallel(ctx.call(name, fn, ...), ctx.effect(action, ...), ...) (docs/workflows.md, "
            '"Parallel calls").', kind="wrong_thread")


class ParallelCallsFailed(ActivityError):
    """Calls of one ctx.parallel group failed; the others' results are recorded and reused on the retry.

    Retryable only when every failure is: the step then runs again and calls only what did not finish.
    `errors` holds each failed call's name and exception, in the order the calls were given.
    """

    def __init__(self, errors: list[tuple[str, BaseException]], of: int) -> None:
        verdicts = [(name, classify(exc)) for name, exc in errors]
        retryable = all(verdict.retryable for _, verdict in verdicts)
        named = "; ".join(f"{name}: {verdict.kind}: {verdict.message}" for name, verdict in verdicts)
        waits = [verdict.retry_after for _, verdict in verdicts if verdict.retry_after is not None]
        super().__init__(f"{len(errors)} of {of} parallel calls failed: {named}", retryable=retryable,
                         kind="parallel_calls_failed", retry_after=max(waits) if waits else None)
        self.errors = errors


class AmbiguousOutcome(DurableError):
    """The request may have reached the downstream, and no answer says whether it took effect."""


class NeedsAttention(DurableError):
    """An operation is UNKNOWN: the run waits for an operator (invariant 4, docs/invariants.md)."""

    def __init__(self, message: str, *, operation_id: str) -> None:
        super().__init__(storable_text(message))  # it becomes the run's error: text from a business key
        self.operation_id = operation_id


class LeaseLost(DurableError):
    """This worker's fencing token is no longer the run's: it must stop writing (invariant 9)."""


# A timeout or broken connection after the request went out: it may have been applied.
# (Connect errors and pool timeouts happen before sending, so they are not ambiguous.)
_AMBIGUOUS_NAMES = {"ReadTimeout", "WriteTimeout", "RemoteProtocolError", "ReadError", "WriteError",
                    "APITimeoutError", "AmbiguousOutcome"}


def is_ambiguous(exc: BaseException) -> bool:
    """Could the downstream have acted on a request that ended with this error?"""
    return bool(_type_names(exc) & _AMBIGUOUS_NAMES) or type(exc) is TimeoutError


@dataclass(frozen=True)
class Classification:
    retryable: bool
    kind: str
    message: str
    error_type: str
    retry_after: float | None = None  # the earliest next attempt the downstream asked for, in seconds

    def __post_init__(self) -> None:
        # Every classification is recorded (the run's error, the ledger's last error, evidence): an error's
        # text from workflow code or a downstream's body may hold a NUL or a lone surrogate, and a failure
        # must always be recordable, so its text is repaired here, where every classification is made.
        for name in ("kind", "message", "error_type"):
            text = getattr(self, name)
            if isinstance(text, str):
                object.__setattr__(self, name, storable_text(text))
        if self.retry_after is not None:  # an adapter's own Classification(retry_after=inf) says nothing usable
            object.__setattr__(self, "retry_after", _seconds(self.retry_after))

    def as_json(self) -> dict[str, object]:
        found: dict[str, object] = {"retryable": self.retryable, "kind": self.kind, "message": self.message,
                                    "type": self.error_type}
        if self.retry_after is not None:
            found["retry_after"] = self.retry_after
        return found


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks for (RFC 9110: delay-seconds or an HTTP-date); None if it says nothing
    usable. A date in the past asks for no wait."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        seconds = float(text)
        return seconds if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT; a zone-less one is read as such
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _seconds(value: object) -> float | None:
    """A number of seconds an error carries, or None: NaN and infinity say nothing usable (and cannot be
    recorded in the run's error)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int past a double's range
        return None
    return seconds if math.isfinite(seconds) else None


def retry_after_of(exc: BaseException | None) -> float | None:
    """What the error, or the error it was raised from, says of waiting: its own `retry_after`, or the
    Retry-After header of the HTTP answer behind it."""
    seen = 0
    while exc is not None and seen < 10:  # causes form a chain; a cycle must not hang us
        own = _seconds(getattr(exc, "retry_after", None))
        if own is not None:
            return max(0.0, own)
        headers = getattr(getattr(exc, "response", None), "headers", None)
        if headers is not None and hasattr(headers, "get"):
            parsed = parse_retry_after(headers.get("Retry-After"))
            if parsed is not None:
                return parsed
        exc, seen = exc.__cause__, seen + 1
    return None


def classify_status(status: int) -> tuple[bool, str]:
    """Classify an HTTP status: rate limits and transient server errors are retryable."""
    if status == 429:
        return True, "rate_limited"
    if status in RETRYABLE_STATUS:
        return True, "transient_http"
    if status in (401, 403):
        return False, "permission_denied"
    if 400 <= status < 500:
        return False, "invalid_request"
    return False, "unexpected_status"


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _type_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


# Names of timeout/connection classes in httpx, openai and requests: matched by name so
# the engine imports none of those libraries.
_TIMEOUT_NAMES = {"TimeoutError", "TimeoutException", "APITimeoutError", "Timeout"}
_NETWORK_NAMES = {"ConnectionError", "NetworkError", "APIConnectionError", "RemoteProtocolError"}


def classify(exc: BaseException) -> Classification:
    """Decide whether an error is worth retrying. Unknown errors are bugs: not retried."""
    message = str(exc) or type(exc).__name__
    error_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
    retryable = getattr(exc, "retryable", None)
    if isinstance(retryable, bool):
        return Classification(retryable, getattr(exc, "kind", "application"), message, error_type,
                              retry_after_of(exc) if retryable else None)
    names = _type_names(exc)
    if names & _TIMEOUT_NAMES:
        return Classification(True, "timeout", message, error_type)
    if names & _NETWORK_NAMES:
        return Classification(True, "network", message, error_type)
    status = _status_of(exc)
    if status is not None:
        ok, kind = classify_status(status)
        return Classification(ok, kind, message, error_type, retry_after_of(exc) if ok else None)
    return Classification(False, "code_error", message, error_type)


class AwaitingApproval(BaseException):
    """Control flow, not an error: the step asked a human and the run now waits, released.

    A BaseException, so that a step's `except Exception` cannot swallow it.
    """

    def __init__(self, request_id: object) -> None:
        super().__init__(f"waiting for approval {request_id}")
        self.request_id = request_id


class Waiting(BaseException):
    """Control flow, not an error: the step waits on a timer, an event or child runs, and the run is parked,
    released (nothing holds a worker). A BaseException, so that a step's `except Exception` cannot swallow it."""

    def __init__(self, what: str) -> None:
        super().__init__(f"waiting for {what}")


class PauseSeen(BaseException):
    """Control flow, not an error: the visit's first outward call found that an operator asked the run to pause, and
    was not sent. The visit is unwound without writing and the run is PAUSED at the checkpoint it started from
    (durable/runtime/pausing.py). A BaseException, so that a step's `except Exception` cannot swallow it."""


class ChildRunFailed(NonRetryableError):
    """A child run the step waited for ended without succeeding: its status and error, for the step to handle
    (or to fail the parent, naming the child)."""

    def __init__(self, run_id: str, workflow: str, status: str, error: Any) -> None:
        message = (error or {}).get("message", "") if isinstance(error, dict) else ""
        super().__init__(f"child run {run_id} ({workflow}) ended {status}" + (f": {message}" if message else ""),
                         kind="child_run_failed")
        self.run_id = run_id
        self.workflow = workflow
        self.status = status
        self.error = error


class ChildKeyTaken(ChildRunFailed):
    """`ctx.start_child` was refused: the child workflow already has an active run for the business key, one this
    run did not start (another parent's child, or a run started by hand). A ChildRunFailed, so a step that handles
    its children's failures handles this too; recorded, so a visit run again gets the same refusal. Give each
    child a key of its own, one that names the parent's business (docs/workflows.md, "Child business keys")."""

    def __init__(self, workflow: str, business_key: str, holder: str | None, message: str) -> None:
        NonRetryableError.__init__(self, message, kind="child_not_started")  # its own message, not "ended ..."
        self.run_id, self.workflow, self.status, self.error = holder or "", workflow, "NOT_STARTED", {"message": message}
        self.business_key = business_key
        self.holder = holder  # the run that holds the key, when durable could tell which


class ApprovalNotGranted(NonRetryableError):
    """`ctx.request_approval` will not return an approval: a human rejected it, its facts failed, it expired or
    was invalidated with nothing left to do but fail. Each reason is a subclass below; a step (or a tool's code)
    may catch it and answer with it, and the run goes on. Not caught, the run fails with its kind."""


class ApprovalRejected(ApprovalNotGranted):
    """A human rejected the request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="approval_rejected")


class ApprovalPreconditionFailed(ApprovalNotGranted):
    """The request's revalidation failed when it was about to be asked (no human is asked to approve on facts that
    already fail): `problems` says why. Recorded, so a visit run again gets the same answer."""

    def __init__(self, approval_kind: str, problems: tuple[str, ...]) -> None:
        super().__init__(f"the {approval_kind} preconditions do not hold: {'; '.join(problems)}",
                         kind="precondition_failed")
        self.problems = problems


class ApprovalExpired(ApprovalNotGranted):
    """Nobody decided in time, and the request says `on_expiry="fail"` (or it was asked again too often)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="approval_expired")


class ApprovalInvalidated(ApprovalNotGranted):
    """The facts moved after a human approved, and the request says `on_invalid="fail"` (or it was asked again
    too often)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="approval_invalidated")
