"""durable: long-lived agent workflows that never do a business action twice.

The public API for agent developers is importable from here. Importing this package has no
side effect: nothing is loaded until a name is asked for (PEP 562), and no Celery app is
created here; the project that runs durable creates its own (durable/project/celery.py for
the standalone project) and finds durable's tasks with autodiscover_tasks().
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each public name and the module that owns it.
_PUBLIC = {
    "ActivityError": "durable.engine.errors",
    "OnActiveBusinessKey": "durable.engine.active_runs",
    "NonRetryableError": "durable.engine.errors",
    "OperationConflict": "durable.engine.errors",
    "ParallelCallsFailed": "durable.engine.errors",
    "ReplayContractViolation": "durable.engine.errors",
    "RetryableError": "durable.engine.errors",
    "RetryPolicy": "durable.engine.retry",
    "Route": "durable.engine.graph",
    "RouteNotChosen": "durable.engine.errors",
    "UndeclaredRoute": "durable.engine.errors",
    "UntrustedOutputRefused": "durable.engine.untrusted",
    "WrongThread": "durable.engine.errors",
    "bound_to_run": "durable.engine.untrusted",
    "register": "durable.registry",
    "Workflow": "durable.workflow",
}

__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    from durable.engine.active_runs import OnActiveBusinessKey
    from durable.engine.errors import (ActivityError, NonRetryableError, OperationConflict, ParallelCallsFailed,
                                       ReplayContractViolation, RetryableError, RouteNotChosen, UndeclaredRoute,
                                       WrongThread)
    from durable.engine.graph import Route
    from durable.engine.retry import RetryPolicy
    from durable.engine.untrusted import UntrustedOutputRefused, bound_to_run
    from durable.registry import register
    from durable.workflow import Workflow


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'durable' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
