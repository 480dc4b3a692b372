"""A run's page links its trace when DURABLE_TRACE_URL says where traces are shown (docs/observability.md, "Traces"),
and only then: a run started while traces were off, or not sampled, has no trace to link."""
import pytest
from django.utils.html import escape
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from durable import services, tracing
from durable.models import Run
from tests.durable.console.screens import detail_url

pytestmark = pytest.mark.django_db

TEMPO = "https://tempo.example/trace/{trace_id}"


@pytest.fixture
def traced_run():
    """A run started while traces were on: its root's traceparent is stored on it."""
    tracing.setup(tracer_provider=TracerProvider())
    try:
        run, _ = services.start_run(workflow="test-trivial", input={}, business_key="T-1", enqueue=False)
    finally:
        tracing.teardown()
    return run


def links(viewer, run):
    html = viewer.get(detail_url(run)).content.decode()
    return html.count('class="trace-link"'), html


def test_the_run_page_links_the_runs_trace_when_the_trace_url_is_set(viewer, traced_run, settings):
    settings.DURABLE_TRACE_URL = TEMPO
    count, html = links(viewer, traced_run)
    trace_id = traced_run.trace_parent.split("-")[1]
    assert count == 1 and f'href="{escape(TEMPO.format(trace_id=trace_id))}"' in html


def test_without_the_trace_url_the_run_page_has_no_trace_link(viewer, traced_run, settings):
    settings.DURABLE_TRACE_URL = ""
    assert links(viewer, traced_run)[0] == 0


def test_a_run_without_a_sampled_trace_has_no_link(viewer, settings):
    settings.DURABLE_TRACE_URL = TEMPO
    untraced, _ = services.start_run(workflow="test-trivial", input={}, business_key="T-2", enqueue=False)
    tracing.setup(tracer_provider=TracerProvider(sampler=ALWAYS_OFF))
    try:
        dropped, _ = services.start_run(workflow="test-trivial", input={}, business_key="T-3", enqueue=False)
    finally:
        tracing.teardown()
    assert untraced.trace_parent == "" and not int(dropped.trace_parent.split("-")[3], 16) & 1  # bit 0: sampled
    assert links(viewer, untraced)[0] == links(viewer, dropped)[0] == 0
    assert tracing.trace_url(Run.objects.get(id=dropped.id)) is None
