"""Across processes: a run started here (the web's part) and advanced by a real Celery worker is one trace. The
worker is the standalone project's, with DURABLE_OTEL=true and its spans sent over OTLP/HTTP to a receiver this
test serves on the loopback: the worker's Celery span continues the message this process sent inside the run's
root, and durable's spans nest under it."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from durable import services
from durable.engine.states import RunStatus
from durable.models import SideEffect
from durable.tools.processes import WorkerProcess
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace endpoint keeping every span it is sent: {span id: span}."""

    def __init__(self) -> None:
        self.spans: dict[str, object] = {}
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        export = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    self.server.spans[span.span_id.hex()] = span
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def attribute(span, key):
    for item in span.attributes:
        if item.key == key:
            return getattr(item.value, item.value.WhichOneof("value"))
    return None


def test_a_run_advanced_by_a_real_worker_continues_the_trace_its_start_opened(traces, receiver, own_queue,
                                                                              worker_log_dir):
    env = {"DURABLE_OTEL": "true", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
           "OTEL_SERVICE_NAME": "durable-worker"}
    with WorkerProcess(env=env, log_path=worker_log_dir / "traces.log", name="traces"):
        run, _ = services.start_run(workflow="test-ledger-probe", input={"business_key": "W-1"}, business_key="W-1")
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the worker to finish the run", timeout=60)
        named = lambda name: [span for span in receiver.spans.values() if span.name == name]  # noqa: E731
        wait_for(lambda: named("advance test-ledger-probe") and named("run/durable.advance_run"),
                 what="the worker's spans to be exported", timeout=30)

    run.refresh_from_db()
    trace_id = run.trace_parent.split("-")[1]
    here = traces.tree()
    message = here.one("apply_async/durable.advance_run")
    assert here.parent(message) is here.one("run test-ledger-probe")  # sent inside the run's root, in this process
    [consumer], [advance] = named("run/durable.advance_run"), named("advance test-ledger-probe")
    assert consumer.trace_id.hex() == advance.trace_id.hex() == trace_id
    assert consumer.parent_span_id.hex() == format(message.context.span_id, "016x")  # across the broker
    assert advance.parent_span_id == consumer.span_id
    steps = {span.name: span for span in receiver.spans.values() if span.parent_span_id == advance.span_id
             and span.name.startswith("step ")}
    assert set(steps) == {"step charge", "step after_charge"}
    [effect] = [span for span in receiver.spans.values() if span.parent_span_id == steps["step charge"].span_id
                and span.name == "side_effect charge"]
    assert attribute(effect, "durable.operation_id") == SideEffect.objects.get(run=run).operation_id
    assert attribute(effect, "durable.side_effect.outcome") == "succeeded"
