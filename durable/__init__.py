"""durable: long-lived agent workflows that never do a business action twice.

The public API for agent developers is importable from here. Importing this package has no
side effect: nothing is loaded until a name is asked for (PEP 562), and no Celery app is
created here; the project that runs durable creates its own (durable/project/celery.py for
the standalone project) and finds durable's tasks with autodiscover_tasks().
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# Each public name and the module that owns it: what a workflow module imports to declare its workflows
# (Workflow, register, RetryPolicy, Migration), type its steps' context (Context), declare its approvals
# (Revalidation), its downstream adapters (register_downstream, Downstream, Capabilities, DownstreamOutcome,
# Classification, classify), its model calls' usage and budget (Usage, Budget), its named limits (limit), its
# schedules (Scheduled, Overlap, CatchUp) and its errors.
_PUBLIC = {
    "ActivityError": "durable.engine.errors",
    "ApprovalExpired": "durable.engine.errors",
    "ApprovalInvalidated": "durable.engine.errors",
    "ApprovalNotGranted": "durable.engine.errors",
    "ApprovalPreconditionFailed": "durable.engine.errors",
    "ApprovalRejected": "durable.engine.errors",
    "Budget": "durable.engine.costs",
    "Capabilities": "durable.engine.ledger",
    "ChildKeyTaken": "durable.engine.errors",
    "ChildRun": "durable.engine.waits",
    "ChildRunFailed": "durable.engine.errors",
    "Classification": "durable.engine.errors",
    "Context": "durable.context",
    "Downstream": "durable.downstream",
    "DownstreamOutcome": "durable.downstream",
    "Event": "durable.engine.waits",
    "Migration": "durable.workflow",
    "NonRetryableError": "durable.engine.errors",
    "NotStorable": "durable.engine.errors",
    "OnActiveBusinessKey": "durable.engine.active_runs",
    "OperationConflict": "durable.engine.errors",
    "ParallelCallsFailed": "durable.engine.errors",
    "ReplayContractViolation": "durable.engine.errors",
    "RetryableError": "durable.engine.errors",
    "RetryPolicy": "durable.engine.retry",
    "Revalidation": "durable.engine.approvals",
    "Route": "durable.engine.graph",
    "CatchUp": "durable.engine.schedules",
    "Overlap": "durable.engine.schedules",
    "Scheduled": "durable.engine.schedules",
    "RouteNotChosen": "durable.engine.errors",
    "UndeclaredRoute": "durable.engine.errors",
    "UntrustedOutputRefused": "durable.engine.untrusted",
    "Usage": "durable.engine.costs",
    "WrongThread": "durable.engine.errors",
    "bound_to_run": "durable.engine.untrusted",
    "classify": "durable.engine.errors",
    "limit": "durable.engine.call_limits",
    "register": "durable.registry",
    "register_downstream": "durable.downstream",
    "send_event": "durable.sending",
    "Workflow": "durable.workflow",
}

__all__ = sorted(_PUBLIC)

# For type checkers, in the `import X as X` form that marks a re-export (PEP 484): a host project's mypy
# --strict (no implicit re-export) reads `from durable import Workflow` then. __all__ above is computed,
# which a checker does not evaluate.
if TYPE_CHECKING:
    from durable.context import Context as Context
    from durable.downstream import Downstream as Downstream
    from durable.downstream import DownstreamOutcome as DownstreamOutcome
    from durable.downstream import register_downstream as register_downstream
    from durable.engine.active_runs import OnActiveBusinessKey as OnActiveBusinessKey
    from durable.engine.approvals import Revalidation as Revalidation
    from durable.engine.call_limits import limit as limit
    from durable.engine.costs import Budget as Budget
    from durable.engine.costs import Usage as Usage
    from durable.engine.errors import ActivityError as ActivityError
    from durable.engine.errors import ApprovalExpired as ApprovalExpired
    from durable.engine.errors import ApprovalInvalidated as ApprovalInvalidated
    from durable.engine.errors import ApprovalNotGranted as ApprovalNotGranted
    from durable.engine.errors import ApprovalPreconditionFailed as ApprovalPreconditionFailed
    from durable.engine.errors import ApprovalRejected as ApprovalRejected
    from durable.engine.errors import ChildKeyTaken as ChildKeyTaken
    from durable.engine.errors import ChildRunFailed as ChildRunFailed
    from durable.engine.errors import Classification as Classification
    from durable.engine.errors import NonRetryableError as NonRetryableError
    from durable.engine.errors import NotStorable as NotStorable
    from durable.engine.errors import OperationConflict as OperationConflict
    from durable.engine.errors import ParallelCallsFailed as ParallelCallsFailed
    from durable.engine.errors import ReplayContractViolation as ReplayContractViolation
    from durable.engine.errors import RetryableError as RetryableError
    from durable.engine.errors import RouteNotChosen as RouteNotChosen
    from durable.engine.errors import UndeclaredRoute as UndeclaredRoute
    from durable.engine.errors import WrongThread as WrongThread
    from durable.engine.errors import classify as classify
    from durable.engine.graph import Route as Route
    from durable.engine.ledger import Capabilities as Capabilities
    from durable.engine.retry import RetryPolicy as RetryPolicy
    from durable.engine.schedules import CatchUp as CatchUp
    from durable.engine.schedules import Overlap as Overlap
    from durable.engine.schedules import Scheduled as Scheduled
    from durable.engine.untrusted import UntrustedOutputRefused as UntrustedOutputRefused
    from durable.engine.untrusted import bound_to_run as bound_to_run
    from durable.engine.waits import ChildRun as ChildRun
    from durable.engine.waits import Event as Event
    from durable.registry import register as register
    from durable.sending import send_event as send_event
    from durable.workflow import Migration as Migration
    from durable.workflow import Workflow as Workflow


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'durable' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
