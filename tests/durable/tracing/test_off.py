"""Without traces nothing changes: with DURABLE_OTEL off, or without the `otel` extra at all, durable imports and
runs its steps, activities and side effects as before, and no OpenTelemetry module is imported. Each case is a
process of its own (a fresh interpreter: this one has imported OpenTelemetry), the missing extra played by an
import hook that finds no `opentelemetry` module."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from django.conf import settings

SCRIPT = """
import importlib.abc, json, sys

class NoOpenTelemetry(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "opentelemetry":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

if sys.argv[1] == "absent":
    sys.meta_path.insert(0, NoOpenTelemetry())
elif sys.argv[3] == "true":  # traces asked for: the host sets its tracer provider, as docs/observability.md shows
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())

import django
django.setup()

from django.core import checks
from durable import services, tracing
from durable.models import Run
from durable.runtime import executor
import tests.durable.ledger_workflows, tests.durable.workflows  # noqa: F401  the probe and counting workflows

statuses = []
for workflow, given in (("test-ledger-probe", {"business_key": "B-1"}),
                        ("test-counting", {"calls_file": sys.argv[2]})):
    run, _ = services.start_run(workflow=workflow, input=given, business_key="OFF-1", enqueue=False)
    executor.advance(run.id)
    run.refresh_from_db()
    statuses.append(run.status)
    trace_parent = run.trace_parent
print(json.dumps({
    "statuses": statuses, "trace_parent": trace_parent, "traces_on": tracing.enabled(),
    "checks": sorted({m.id for m in checks.run_checks(tags=["durable"]) if m.id in ("durable.W040", "durable.E041")}),
    "imported": sorted(m for m in sys.modules if m.partition(".")[0] == "opentelemetry"),
}))
"""


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    """A migrated SQLite database each case starts from a copy of (migrating takes seconds)."""
    folder = tmp_path_factory.mktemp("traces-off")
    env = {**os.environ, "DURABLE_VAR_DIR": str(folder)}
    env.pop("DATABASE_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=settings.BASE_DIR, check=True,
                   capture_output=True)
    return folder / "durable.sqlite3"


def run_in_a_process(migrated, tmp_path, extra: str, otel: str) -> dict:
    shutil.copy(migrated, tmp_path / "durable.sqlite3")
    # Not the Pydantic AI twin the demo adds when that extra is installed: Pydantic AI imports OpenTelemetry itself.
    env = {**os.environ, "DURABLE_VAR_DIR": str(tmp_path), "DURABLE_OTEL": otel,
           "DURABLE_WORKFLOW_MODULES": "durable.tools.demo.claims_agent,durable.tools.demo.support_agent"}
    env.pop("DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT, extra, str(tmp_path / "calls"), otel], env=env,
                         cwd=settings.BASE_DIR, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("extra, otel", [("absent", "false"), ("installed", "false")])
def test_without_traces_durable_runs_as_before_and_imports_no_opentelemetry(migrated, tmp_path, extra, otel):
    report = run_in_a_process(migrated, tmp_path, extra, otel)
    assert report == {"statuses": ["SUCCEEDED", "SUCCEEDED"], "trace_parent": "", "traces_on": False,
                      "checks": [], "imported": []}


def test_asking_for_traces_without_the_extra_warns_and_changes_nothing_else(migrated, tmp_path):
    report = run_in_a_process(migrated, tmp_path, "absent", "true")
    assert report == {"statuses": ["SUCCEEDED", "SUCCEEDED"], "trace_parent": "", "traces_on": False,
                      "checks": ["durable.W040"], "imported": []}


def test_asking_for_traces_with_the_extra_turns_them_on_in_every_process_that_starts_django(migrated, tmp_path):
    report = run_in_a_process(migrated, tmp_path, "installed", "true")
    assert report["statuses"] == ["SUCCEEDED", "SUCCEEDED"] and report["traces_on"] is True
    version, trace_id, span_id, flags = report["trace_parent"].split("-")  # W3C traceparent of the run's root
    assert (version, len(trace_id), len(span_id)) == ("00", 32, 16) and int(flags, 16) & 1  # traced, sampled
    assert report["checks"] == [] and "opentelemetry.instrumentation.celery" in report["imported"]
