"""Loaded first (`-p tests.xdist_worker`, pyproject's addopts): under pytest-xdist, each test process keeps its own
var/ folder (the embedded broker, the Prometheus files, the SQLite test database), so two processes
never read each other's counters or messages. It runs before pytest-django loads the settings, which read
DURABLE_VAR_DIR once."""
from __future__ import annotations

import os
from pathlib import Path

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and "DURABLE_VAR_DIR" not in os.environ:
    _root = Path(__file__).resolve().parent.parent
    os.environ["DURABLE_VAR_DIR"] = str(_root / "var" / f"xdist-{_worker}")
    # The controller's settings set this for the process it spawned us from: the metrics follow var/ instead.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["DURABLE_VAR_DIR"] + "/metrics"
