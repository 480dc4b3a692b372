"""durable: long-lived agent workflows that never do a business action twice.

The public API for agent developers is importable from here.
"""
from durable.celery import app as celery_app
from durable.engine.errors import ActivityError, NonRetryableError, ReplayContractViolation, RetryableError
from durable.engine.retry import RetryPolicy
from durable.registry import register
from durable.workflow import Workflow

__all__ = [
    "ActivityError",
    "NonRetryableError",
    "ReplayContractViolation",
    "RetryPolicy",
    "RetryableError",
    "Workflow",
    "celery_app",
    "register",
]
