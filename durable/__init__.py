"""durable: long-lived agent workflows that never do a business action twice.

The public API for agent developers is importable from here.
"""
from durable.celery import app as celery_app
from durable.engine.active_runs import OnActiveBusinessKey
from durable.engine.errors import ActivityError, NonRetryableError, ReplayContractViolation, RetryableError
from durable.engine.retry import RetryPolicy
from durable.engine.untrusted import UntrustedOutputRefused, bound_to_run
from durable.registry import register
from durable.workflow import Workflow

__all__ = [
    "ActivityError",
    "NonRetryableError",
    "OnActiveBusinessKey",
    "ReplayContractViolation",
    "RetryPolicy",
    "RetryableError",
    "UntrustedOutputRefused",
    "Workflow",
    "bound_to_run",
    "celery_app",
    "register",
]
