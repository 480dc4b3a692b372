"""durable's spans, and the instrumentation of Django, Celery and psycopg: imported by tracing.setup() alone.

Span names are low in cardinality (`step triage`, `activity llm.plan`, `side_effect refund`); what identifies
one run, visit or operation is in attributes: durable.run_id, durable.visit, durable.operation_id...
(docs/observability.md, "Traces", lists them).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from durable.engine.errors import ActivityError, LeaseLost, NeedsAttention, PauseSeen
from durable.engine.ids import family_operation_id

T = TypeVar("T")
Attributes = dict[str, AttributeValue]

INSTRUMENTORS = (DjangoInstrumentor, CeleryInstrumentor, PsycopgInstrumentor)
_propagator = TraceContextTextMapPropagator()


@dataclass
class _Effect:
    """The side effect being performed on this thread, and whether its downstream was called."""

    span: Span
    sent: bool = False


_root: ContextVar[Span | None] = ContextVar("durable_trace_root", default=None)  # the run being started
_activity: ContextVar[Span | None] = ContextVar("durable_trace_activity", default=None)  # the visit's latest activity
_effect: ContextVar[_Effect | None] = ContextVar("durable_trace_effect", default=None)


class Spans:
    """What the hooks in durable/tracing/__init__.py do once traces are on."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.tracer = trace.get_tracer("durable", tracer_provider=tracer_provider)
        self._revisitable: dict[tuple[str, int], frozenset[str]] = {}

    @classmethod
    def instrumented(cls, tracer_provider: Any = None) -> Spans:
        for instrumentor in INSTRUMENTORS:
            instrumentor().instrument(tracer_provider=tracer_provider)  # each is a singleton: once per process
        return cls(tracer_provider)

    def uninstrument(self) -> None:
        for instrumentor in INSTRUMENTORS:
            instrumentor().uninstrument()

    @contextmanager
    def _opened(self, name: str, attributes: Attributes, *, kind: SpanKind = SpanKind.INTERNAL,
                context: Context | None = None, links: list[Link] | None = None,
                start_time: int | None = None) -> Iterator[Span]:
        """A span, current inside the block. An Exception marks it failed; control flow that is not an
        Exception (AwaitingApproval: the run waits) does not."""
        span = self.tracer.start_span(name, context=context, kind=kind, attributes=attributes, links=links,
                                      start_time=start_time)
        try:
            with trace.use_span(span, record_exception=False, set_status_on_exception=False):
                yield span
        except Exception as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            span.end()

    # -- The run's trace -------------------------------------------------------------------------------------

    def run_start(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The root of a new trace for the run, linked to the span that was current (the API request's)."""
        starter = trace.get_current_span().get_span_context()
        workflow = str(kwargs.get("workflow", ""))
        with self._opened(f"run {workflow}", {"durable.workflow": workflow}, context=Context(),
                          links=[Link(starter)] if starter.is_valid else None) as span:
            token = _root.set(span)
            try:
                run, created = fn(*args, **kwargs)
            finally:
                _root.reset(token)
            span.set_attributes({"durable.run_id": str(run.id), "durable.workflow_version": run.workflow_version,
                                 "durable.run.created": created})
            return run, created

    def run_fields(self) -> dict[str, str]:
        root = _root.get()
        if root is None:  # a run created outside services.start_run (tools seeding rows): no trace of its own
            return {}
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(root))
        return {"trace_parent": carrier.get("traceparent", "")}

    def _in_run(self, trace_parent: str) -> tuple[Context | None, list[Link] | None]:
        """Where a worker task's span goes: under the Celery message's span when that is in the run's trace,
        else under the run's stored root, linked to the message's span; in the message's trace for a run
        started while traces were off."""
        here = trace.get_current_span().get_span_context()
        stored = _propagator.extract({"traceparent": trace_parent}) if trace_parent else None
        root = trace.get_current_span(stored).get_span_context() if stored is not None else None
        if root is None or not root.is_valid or (here.is_valid and here.trace_id == root.trace_id):
            return None, None
        return stored, [Link(here)] if here.is_valid else None

    def advance(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        _, lease, run = args
        context, links = self._in_run(run.trace_parent)
        attributes: Attributes = {"durable.run_id": str(run.id), "durable.workflow": run.workflow_name,
                                  "durable.workflow_version": run.workflow_version, "durable.worker": lease.owner,
                                  "durable.resuming": bool(lease.resuming)}
        if lease.waited_seconds is not None:
            attributes["durable.waited_seconds"] = lease.waited_seconds
        with self._opened(f"advance {run.workflow_name}", attributes, context=context, links=links) as span:
            outcome = fn(*args, **kwargs)
            span.set_attribute("durable.steps", outcome.steps)
            return outcome

    # -- Step visits and activities --------------------------------------------------------------------------

    def visit(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        workflow, _, ctx = args[:3]
        attributes = _visit_attributes(ctx)
        # Which visit of its step this is costs a query: asked only of a step a route can lead back to.
        attributes["durable.visit_number"] = ctx.visit_number if ctx.step in self.revisitable(workflow) else 1
        with self._opened(f"step {ctx.step}", attributes) as span:
            token = _activity.set(None)
            try:
                new_state, next_step = fn(*args, **kwargs)
            except BaseException as exc:
                span.set_attribute("durable.step.outcome", _step_outcome_of(exc))
                raise
            finally:
                _activity.reset(token)
            span.set_attribute("durable.step.outcome", "done")
            if next_step is not None:
                span.set_attribute("durable.next_step", next_step)
            return new_state, next_step

    def revisitable(self, workflow: Any) -> frozenset[str]:
        """The steps of the workflow's graph that a route can lead back to (a loop's)."""
        key = (workflow.name, workflow.version)
        if key not in self._revisitable:
            self._revisitable[key] = _on_a_cycle(workflow.graph.edges())
        return self._revisitable[key]

    @contextmanager
    def activity(self, ctx: Any, name: str, index: int) -> Iterator[None]:
        with self._opened(f"activity {name}", _activity_attributes(ctx, name, index, reused=False)) as span:
            _activity.set(span)  # left set after the call, for a model_call made right after it returned
            yield

    def in_activity(self, ctx: Any, name: str, index: int, call: Callable[[], T]) -> Callable[[], T]:
        def traced() -> T:
            with self.activity(ctx, name, index):
                return call()
        return traced

    def reused(self, ctx: Any, name: str, index: int) -> None:
        with self._opened(f"activity {name}", _activity_attributes(ctx, name, index, reused=True)):
            pass

    def model_call(self, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
        attributes: Attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        if input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = input_tokens
        if output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = output_tokens
        made_by = _activity.get()
        # The call took the activity's time: its span starts with the activity's, and ends with it if it ended.
        start, end = getattr(made_by, "start_time", None), getattr(made_by, "end_time", None)
        context = trace.set_span_in_context(made_by) if made_by is not None else None
        span = self.tracer.start_span(f"chat {model}", context=context, kind=SpanKind.CLIENT, attributes=attributes,
                                      start_time=start)
        span.end(end_time=end)

    # -- Side effects ----------------------------------------------------------------------------------------

    def side_effect(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        visit = args[0]
        action, business_key = kwargs["action"], kwargs["business_key"]
        op_id = _operation_of(visit, action, business_key)
        attributes = _effect_attributes(str(visit.run_id), visit.step, action, op_id)
        attributes["durable.downstream"] = kwargs["downstream"].name
        with self._opened(f"side_effect {action}", attributes) as span:
            effect = _Effect(span)
            token = _effect.set(effect)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                span.set_attributes({"durable.side_effect.outcome": _outcome_of(exc),
                                     "durable.side_effect.sent": effect.sent})
                raise
            finally:
                _effect.reset(token)
            span.set_attributes({"durable.side_effect.outcome": "succeeded" if effect.sent else "recorded",
                                 "durable.side_effect.sent": effect.sent})
            return result

    def send(self, fn: Callable[[Any], T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
        send = args[0]  # Send.call(self)
        effect = _effect.get()
        called = {"durable.downstream": send.downstream.name, "durable.operation_id": send.row.operation_id}
        if effect is not None:  # inside ctx.side_effect's span
            effect.sent = True
            with self._opened(f"call {send.downstream.name}", called, kind=SpanKind.CLIENT):
                return fn(send)
        # ctx.parallel: prepared and committed on the step's thread, sent here: the side effect's span is the send's
        row = send.row
        attributes = _effect_attributes(str(row.run_id), row.step, row.action_name, row.operation_id)
        attributes.update({"durable.downstream": send.downstream.name, "durable.side_effect.sent": True})
        with self._opened(f"side_effect {row.action_name}", attributes) as span:
            try:
                with self._opened(f"call {send.downstream.name}", called, kind=SpanKind.CLIENT):
                    answer = fn(send)
            except Exception:
                span.set_attribute("durable.side_effect.outcome", "error")
                raise
            span.set_attribute("durable.side_effect.outcome", "succeeded")
            return answer

    def recorded_effect(self, ctx: Any, action: str, business_key: str) -> None:
        op_id = _operation_of(ctx, action, business_key)
        attributes = _effect_attributes(str(ctx.run_id), ctx.step, action, op_id)
        attributes.update({"durable.side_effect.outcome": "recorded", "durable.side_effect.sent": False})
        with self._opened(f"side_effect {action}", attributes):
            pass

    # -- Waits -----------------------------------------------------------------------------------------------

    @contextmanager
    def waiting(self, kind: str, attributes: Mapping[str, AttributeValue]) -> Iterator[Wait]:
        with self._opened(f"wait {kind}", {"durable.wait.kind": kind, **attributes}) as span:
            try:
                yield Wait(span)
            except BaseException as exc:
                if isinstance(exc, Exception):
                    span.set_attribute("durable.wait.outcome", "error")
                else:  # control flow: the run parks until what it waits for arrives
                    span.set_attribute("durable.wait.outcome", "waiting")
                    if getattr(exc, "request_id", None) is not None:
                        span.set_attribute("durable.wait.id", str(getattr(exc, "request_id")))
                raise
            span.set_attribute("durable.wait.outcome", "ready")


@dataclass
class Wait:
    span: Span

    def returned(self, value: T) -> T:
        """What the wait returned: an approval names its request."""
        if isinstance(value, dict) and value.get("request"):
            self.span.set_attribute("durable.wait.id", str(value["request"]))
        return value


def _visit_attributes(ctx: Any) -> Attributes:
    return {"durable.run_id": str(ctx.run_id), "durable.workflow": ctx.workflow_name, "durable.step": ctx.step,
            "durable.visit": ctx.visit, "durable.attempt": ctx.attempt}


def _activity_attributes(ctx: Any, name: str, index: int, *, reused: bool) -> Attributes:
    return {"durable.run_id": str(ctx.run_id), "durable.step": ctx.step, "durable.visit": ctx.visit,
            "durable.activity": name, "durable.call_index": index, "durable.reused": reused}


def _effect_attributes(run_id: str, step: str, action: str, op_id: str) -> Attributes:
    return {"durable.run_id": run_id, "durable.step": step, "durable.action": action, "durable.operation_id": op_id}


def _operation_of(visit: Any, action: str, business_key: str) -> str:
    """The operation id the ledger uses for the visit's side effect: a fork's is its family's
    (durable/runtime/side_effects.py's `prepare`)."""
    root = visit.family_root
    return family_operation_id(str(visit.run_id), str(root) if root else None, action, business_key)


def _step_outcome_of(exc: BaseException) -> str:
    """A visit's outcome from what ended it: an error, a pause seen before its first call, or a wait."""
    if isinstance(exc, Exception):
        return "error"
    return "paused" if isinstance(exc, PauseSeen) else "waiting"


def _outcome_of(exc: BaseException) -> str:
    """A side effect's outcome from what its step got: UNKNOWN waits for an operator; a retryable failure is
    retried (with the same key, or reconciled first); a final one fails the step."""
    if isinstance(exc, NeedsAttention):
        return "unknown"
    if isinstance(exc, LeaseLost):
        return "lease_lost"
    if isinstance(exc, ActivityError):
        return "retryable" if exc.retryable else "failed"
    return "error"


def _on_a_cycle(edges: Any) -> frozenset[str]:
    """The steps from which the graph's routes can come back to them."""
    after: dict[str, set[str]] = {}
    for edge in edges:
        if edge.target is not None:
            after.setdefault(edge.source, set()).add(edge.target)
    found = set()
    for step in after:
        seen, todo = set(), list(after[step])
        while todo:
            here = todo.pop()
            if here == step:
                found.add(step)
                break
            if here not in seen:
                seen.add(here)
                todo.extend(after.get(here, ()))
    return frozenset(found)
