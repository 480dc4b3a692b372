"""The traces' launch checks (`manage.py check --tag durable`): DURABLE_OTEL without the extra, a trace link
without the trace's id."""
from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register

from durable import tracing
from durable.conf import durable_settings

DURABLE = "durable"


@register(DURABLE)
def traces_are_on_when_asked(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_traces(durable_settings.DURABLE_OTEL, tracing.enabled())


@register(DURABLE)
def trace_links_name_the_trace(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_trace_url(durable_settings.DURABLE_TRACE_URL)


def check_traces(asked: bool, on: bool) -> list[CheckMessage]:
    if not asked or on:
        return []
    return [Warning("DURABLE_OTEL is on but traces are off: OpenTelemetry is not installed in this environment.",
                    hint="pip install 'durable[otel]' (docs/observability.md#traces), or turn DURABLE_OTEL off.",
                    obj="DURABLE_OTEL", id="durable.W040")]


def check_trace_url(template: str) -> list[CheckMessage]:
    if not template or "{trace_id}" in template:
        return []
    return [Error(f"DURABLE_TRACE_URL {template!r} has no {{trace_id}}: every run page would link the same page.",
                  hint="Put {trace_id} where the trace's id goes, e.g. https://tempo.example/trace/{trace_id}.",
                  obj="DURABLE_TRACE_URL", id="durable.E041")]
