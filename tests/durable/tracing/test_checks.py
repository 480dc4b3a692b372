"""The traces' launch checks: DURABLE_OTEL asked for where OpenTelemetry is missing (a warning: the project runs,
untraced), and a trace URL without the trace's id (an error: every run page would link the same page)."""
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from durable.tracing.checks import check_trace_url, check_traces


def test_traces_asked_for_but_off_are_named_with_the_extra_to_install():
    [warning] = check_traces(asked=True, on=False)
    assert warning.id == "durable.W040" and "durable[otel]" in warning.hint
    assert check_traces(asked=True, on=True) == check_traces(asked=False, on=False) == []


def test_a_trace_url_must_say_where_the_trace_id_goes():
    [error] = check_trace_url("https://tempo.example/explore")
    assert error.id == "durable.E041" and "{trace_id}" in error.hint
    assert check_trace_url("https://tempo.example/trace/{trace_id}") == check_trace_url("") == []


def test_manage_py_check_refuses_a_trace_url_without_the_trace_id(settings):
    settings.DURABLE_TRACE_URL = "https://tempo.example/explore"
    with pytest.raises(SystemCheckError, match="durable.E041"):
        call_command("check", "--tag", "durable")
