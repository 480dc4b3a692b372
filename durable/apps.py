"""The core app: runs, checkpoints, journal, ledger, executor."""
from django.apps import AppConfig

from durable.conf import durable_settings


class DurableConfig(AppConfig):
    name = "durable"
    verbose_name = "Durable runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.apps import apps

        from durable import (
            checks,  # noqa: F401  registers the launch checks
            fleet,
            role_audit,
            security,
            tracing,
        )
        from durable.console import timezones
        from durable.notifications import checks as _notify_checks  # noqa: F401  and the webhook's
        from durable.notifications import receivers as notifications
        from durable.registry import discover
        from durable.tracing import checks as _trace_checks  # noqa: F401  and the traces'

        discover(durable_settings.DURABLE_WORKFLOW_MODULES)
        tracing.start_if_asked()  # DURABLE_OTEL: instruments this process, before it loads any middleware
        fleet.connect_web()  # a web process records itself at its first request (its workflows, for errors)
        role_audit.connect()
        timezones.connect()
        notifications.connect()
        security.connect()
        from durable.runtime import stream
        from durable.runtime.sweeper import SweepTask, add_to_sweep

        add_to_sweep("streams", SweepTask(order=30, run=stream.prune, done="deleted {} stream chunk(s) past retention"))
        _sweep_schedules()
        if apps.is_installed("axes"):  # a host that has not added it yet gets durable.W030, not an ImportError
            from durable import lockout

            lockout.connect()


def _sweep_schedules() -> None:
    """The schedules' part of every sweep (durable/schedules.py): before the runs are re-sent, so a run a fire time
    starts goes out in the same beat."""
    from durable.runtime.sweeper import SweepTask, add_to_sweep
    from durable.schedules import sweep

    add_to_sweep("schedules", SweepTask(order=5, run=sweep, done="started {} scheduled run(s)"))
