"""Celery tasks: advance a run, sweep for runs that must be picked up again, prune finished ones."""
from __future__ import annotations

from celery import shared_task

from durable.notifications import tasks as notification_tasks  # noqa: F401  registers them with any Celery app
from durable.runtime import dispatch, executor, sweeper


@shared_task(name=dispatch.ADVANCE_RUN, acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> None:
    outcome = executor.advance(run_id)
    if outcome.requeue:
        dispatch.enqueue(run_id)
    elif outcome.retry_in is not None:
        dispatch.enqueue(run_id, countdown=outcome.retry_in)


@shared_task(name="durable.sweep", ignore_result=True)
def sweep() -> int:
    return sweeper.sweep_all().enqueued


@shared_task(name="durable.prune", ignore_result=True)
def prune() -> int:
    """Beat's daily retention pass, when DURABLE_RETENTION_DAYS is set."""
    from datetime import timedelta

    from durable.conf import durable_settings
    from durable.retention import prune as prune_finished

    return prune_finished(timedelta(days=durable_settings.DURABLE_RETENTION_DAYS)).runs
