"""Where the standalone project's spans go when DURABLE_OTEL is on: OpenTelemetry's own variables decide.

A host project sets its own tracer provider (docs/observability.md#traces); this is the standalone project's.
"""
from __future__ import annotations

from collections.abc import Mapping


def export_traces(environ: Mapping[str, str]) -> bool:
    """Set this process's tracer provider: spans batched to the OTLP/HTTP endpoint OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
    or OTEL_EXPORTER_OTLP_ENDPOINT names (the exporter reads its other OTEL_EXPORTER_OTLP_* variables), or printed
    with OTEL_TRACES_EXPORTER=console; service.name from OTEL_SERVICE_NAME, else "durable". False, and nothing
    set, without either or without the `otel` extra (then durable.W040 says why there are no traces)."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        return False
    exporter: SpanExporter
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporter = OTLPSpanExporter()
    elif environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        return False
    provider = TracerProvider(resource=Resource.create({} if environ.get("OTEL_SERVICE_NAME")
                                                       else {"service.name": "durable"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))  # its thread starts again in a forked child
    trace.set_tracer_provider(provider)
    return True
