"""Traces on in this process for a test, their spans kept in memory and read back as a tree."""
from __future__ import annotations

import pytest
from django.db import connections
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from durable import tracing
from durable.runtime.heartbeat import pooled
from tests.durable.ledger_workflows import probe


class Traces:
    """Spans kept in memory, and a tracer of the same provider for what the test plays itself (a Celery worker)."""

    def __init__(self):
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")

    def tree(self):
        return Tree(self.exporter.get_finished_spans())


@pytest.fixture
def traces():
    """Traces on in this process; off again after the test."""
    traces = Traces()
    opened_anew()  # psycopg is instrumented when a connection opens: the next one is
    tracing.setup(tracer_provider=traces.provider)
    probe.reset()
    yield traces
    tracing.teardown()
    opened_anew()
    probe.reset()


def opened_anew():
    """Close this process's connections, and its pool's (pooled ones were opened before): the next is new."""
    connections.close_all()
    if pooled():
        connections["default"].close_pool()


class Tree:
    """The finished spans, by id and by parent."""

    def __init__(self, spans):
        self.spans = list(spans)
        self.by_id = {span.context.span_id: span for span in self.spans}

    def named(self, name, **attributes):
        return [span for span in self.spans if span.name == name
                and all(span.attributes.get(key) == value for key, value in attributes.items())]

    def one(self, name, **attributes):
        found = self.named(name, **attributes)
        assert len(found) == 1, (name, attributes, [(s.name, dict(s.attributes)) for s in self.spans])
        return found[0]

    def parent(self, span):
        return self.by_id.get(span.parent.span_id) if span.parent else None

    def children(self, span, name=None):
        """durable's spans under `span` (not the database's, which psycopg's instrumentation adds on Postgres)."""
        return [child for child in self.all_children(span) if child.instrumentation_scope.name == "durable"
                and (name is None or child.name == name)]

    def all_children(self, span):
        return [child for child in self.spans if child.parent and child.parent.span_id == span.context.span_id]
