"""Traces (docs/observability.md, "Traces"): the hooks the runtime calls, which do nothing until `setup()`.

With DURABLE_OTEL on and the `otel` extra installed, `setup()` (called once from durable's AppConfig.ready())
instruments Django, Celery and psycopg with OpenTelemetry's own packages and turns these hooks on: a run's
life becomes one trace, from the request that started it to its last step. Until then nothing here imports
OpenTelemetry, and each hook costs one test of a module global: the spans themselves live in
durable/tracing/spans.py, which only `setup()` imports.

The run's trace: starting a run opens the trace's root span, linked to the span that was current then (the
API request's), and stores its W3C traceparent on the run (`Run.trace_parent`). A run lives for days, far
longer than any process or span, so every later worker task opens its own span under that stored root: a
child of the Celery message's span when the message came from the run's own trace, else a child of the root
linked to it. Step visits, activities, model calls, side effects and waits nest under the task's span.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from uuid import UUID

from durable.conf import durable_settings

if TYPE_CHECKING:
    from durable.models import Run
    from durable.tracing.spans import Spans

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_spans: Spans | None = None  # set by setup(): the hooks are off while it is None
_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()  # reusable: entered and left any number of times


class VisitContext(Protocol):
    """What the spans read of a visit (durable/runtime/visit.py's Visit, or the step context, which says the same)."""

    run_id: UUID
    workflow_name: str
    workflow_version: int
    step: str
    attempt: int
    visit: int


class NotInstalled(Exception):
    """The `otel` extra is not installed: DURABLE_OTEL cannot turn traces on (durable.W040 says so)."""


def setup(*, tracer_provider: Any = None) -> None:
    """Turn traces on: instrument Django, Celery and psycopg and open durable's own spans, once per process.

    Spans go to `tracer_provider`, else to OpenTelemetry's global one, which the host sets (docs/observability.md).
    Raises NotInstalled when the `otel` extra is missing; a second call changes nothing.
    """
    global _spans
    if _spans is not None:
        return
    try:
        from durable.tracing import spans  # the one import of OpenTelemetry
    except ImportError as exc:
        raise NotInstalled(f"DURABLE_OTEL is on but OpenTelemetry is not installed ({exc}); "
                        "pip install 'durable[otel]'") from exc
    _spans = spans.Spans.instrumented(tracer_provider)


def start_if_asked() -> None:
    """At start-up (durable's AppConfig.ready()): setup() when DURABLE_OTEL is on and the extra installed
    (durable.W040 warns when it is not); nothing at all when it is off."""
    if durable_settings.DURABLE_OTEL:
        with contextlib.suppress(NotInstalled):
            setup()


def teardown() -> None:
    """Turn traces off again and remove the instrumentation (tests)."""
    global _spans
    if _spans is not None:
        _spans.uninstrument()
        _spans = None


def enabled() -> bool:
    return _spans is not None


# -- The hooks. Each returns at once while traces are off. -----------------------------------------------------

def _through(fn: F, method: str) -> F:
    """`fn` as it is while traces are off; once they are on, called through Spans.<method>(fn, args, kwargs)."""
    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if _spans is None:
            return fn(*args, **kwargs)
        return getattr(_spans, method)(fn, args, kwargs)
    return traced  # type: ignore[return-value]


def starts_run(fn: F) -> F:
    """Decorates services.start_run: the root span of the run's trace, around its start (`durable.run.created`
    false when an idempotent start returned an existing run, which keeps its own trace)."""
    return _through(fn, "run_start")


def run_fields() -> dict[str, str]:
    """What a new run stores of its trace (its root's traceparent), given to Run.objects.create; {} when off."""
    return {} if _spans is None else _spans.run_fields()


def advancing(fn: F) -> F:
    """Decorates the executor's `_advance_claimed(store, lease, run)`: one span per worker task, in the run's trace."""
    return _through(fn, "advance")


def visit(fn: F) -> F:
    """Decorates the executor's `_execute_step(workflow, step, ctx, state)`: one span per step visit."""
    return _through(fn, "visit")


def activity(ctx: VisitContext, name: str, index: int) -> AbstractContextManager[None]:
    """Around a live activity call (the step's thread): its span."""
    return _NOTHING if _spans is None else _spans.activity(ctx, name, index)


def in_activity(ctx: Any, name: str, index: int, call: Callable[[], T]) -> Callable[[], T]:
    """A live activity of ctx.parallel (`ctx`: the step's context), to run on a pool thread inside its span;
    `call` itself when off."""
    return call if _spans is None else _spans.in_activity(ctx, name, index, call)


def reused(ctx: VisitContext, name: str, index: int) -> None:
    """An activity whose recorded result was returned: a span that says so (nothing was called)."""
    if _spans is not None:
        _spans.reused(ctx, name, index)


def side_effect(fn: F) -> F:
    """Decorates side_effects.perform(visit, *, action, business_key, ...): one span per side effect,
    with its operation id and outcome."""
    return _through(fn, "side_effect")


def sending(fn: F) -> F:
    """Decorates side_effects.Send.call: the downstream call's span (and in ctx.parallel, the side effect's)."""
    return _through(fn, "send")


def recorded_effect(ctx: Any, action: str, business_key: str) -> None:
    """A side effect of ctx.parallel whose recorded result was returned: its span (nothing was sent)."""
    if _spans is not None:
        _spans.recorded_effect(ctx, action, business_key)


def waits(kind: str) -> Callable[[F], F]:
    """Decorates a call that may park the run (ctx.request_approval): a `wait {kind}` span, see `waiting`."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if _spans is None:
                return fn(*args, **kwargs)
            with _spans.waiting(kind, {}) as wait:
                return wait.returned(fn(*args, **kwargs))
        return traced  # type: ignore[return-value]
    return decorate


def waiting(kind: str, **attributes: str | int | float | bool) -> AbstractContextManager[object]:
    """Around a wait (approval, timer, event, child run): a `wait {kind}` span under the visit's.

    Its `durable.wait.outcome` is "waiting" when the block raises control flow that parks the run (an
    exception that is not an Exception, as AwaitingApproval is), "ready" when what it waits for is there and
    the block returns, else "error". Each of `attributes` is added as `durable.wait.<name>`
    (`waiting("timer", until="2025-06-01T09:00:00Z")`); `durable.wait.id` names what it waits for.
    """
    if _spans is None:
        return _NOTHING
    return _spans.waiting(kind, {f"durable.wait.{name}": value for name, value in attributes.items()})


def model_call(model: str, input_tokens: int | None, output_tokens: int | None) -> None:
    """A model call made by the activity running now: a `chat {model}` span with the gen_ai.* attributes
    (gen_ai.request.model, gen_ai.usage.input_tokens, gen_ai.usage.output_tokens), child of the activity's span
    and starting with it. Call it inside the activity's function or right after it returned, before the next
    call; not for a recorded result reused on replay (its tokens were spent, and traced, the first time)."""
    if _spans is not None:
        _spans.model_call(model, input_tokens, output_tokens)


# -- The run page ---------------------------------------------------------------------------------------------

def trace_id(run: Run) -> str | None:
    """The run's trace id (32 hex digits) when its start was traced and sampled, else None."""
    parts = (run.trace_parent or "").split("-")  # version-trace_id-parent_id-flags (W3C Trace Context)
    if len(parts) != 4 or len(parts[1]) != 32 or parts[3] not in _SAMPLED:
        return None
    return parts[1]


_SAMPLED = frozenset(f"{flags:02x}" for flags in range(256) if flags & 1)  # the flags' bit 0: the trace was kept


def trace_url(run: Run) -> str | None:
    """Where the run's trace is shown: DURABLE_TRACE_URL with the run's trace id, or None."""
    template = durable_settings.DURABLE_TRACE_URL
    found = trace_id(run) if template else None
    return template.replace("{trace_id}", found) if found else None
