"""durable.testing: run a workflow to its end in a test, in the test's own process (docs/testing.md).

A pytest plugin a host project enables in its top conftest.py, `pytest_plugins = ["durable.testing"]`. It gives
the `durable_kit` fixture: start runs, advance them until they end or wait, move the clock past a sleep, an
event's deadline or an approval's expiry, send events, decide approvals as a given user, stand in for
downstreams, crash a worker at any fault point, and read the ledger, the journal and the timeline. Everything
else is durable's own: its services, executor, sweeper, approvals and the test's database (pytest-django's).

Importing this module loads no Django model: the kit's names load on first use (PEP 562), once Django is set up.
"""
from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from typing import TYPE_CHECKING, Any

import pytest

_PUBLIC = {
    "Clock": "durable.testing.clock",
    "Crash": "durable.testing.crashes",
    "DurableKit": "durable.testing.kit",
    "FAULT_POINTS": "durable.runtime.fault_points",
    "StandIn": "durable.testing.stand_ins",
    "TestRun": "durable.testing.kit",
    "WAIT_FAULT_POINTS": "durable.runtime.fault_points",
    "WorkerCrashed": "durable.testing.crashes",
}

__all__ = sorted([*_PUBLIC, "durable_kit"])

if TYPE_CHECKING:
    from durable.runtime.fault_points import FAULT_POINTS as FAULT_POINTS
    from durable.runtime.fault_points import WAIT_FAULT_POINTS as WAIT_FAULT_POINTS
    from durable.testing.clock import Clock as Clock
    from durable.testing.crashes import Crash as Crash
    from durable.testing.crashes import WorkerCrashed as WorkerCrashed
    from durable.testing.kit import DurableKit as DurableKit
    from durable.testing.kit import TestRun as TestRun
    from durable.testing.stand_ins import StandIn as StandIn


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'durable.testing' has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name]), name)


@pytest.fixture
def durable_kit(transactional_db: None) -> Iterator[DurableKit]:
    """This test's durable: runs advanced in this process on the test database, committed as a worker commits
    (pytest-django's transactional_db), with a clock of the test's own. What it stood in for is put back after."""
    from durable.testing.kit import DurableKit

    kit = DurableKit()
    try:
        yield kit
    finally:
        kit.close()
