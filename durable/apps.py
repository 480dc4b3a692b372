"""The core app: runs, checkpoints, journal, ledger, executor."""
from django.apps import AppConfig

from durable.conf import durable_settings


class DurableConfig(AppConfig):
    name = "durable"
    verbose_name = "Durable runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from durable import checks  # noqa: F401  registers the launch checks
        from durable.notifications import checks as _notify_checks  # noqa: F401  and the webhook's
        from durable import fleet, role_audit
        from durable.console import timezones
        from durable.notifications import receivers as notifications
        from durable.registry import discover

        discover(durable_settings.DURABLE_WORKFLOW_MODULES)
        role_audit.connect()
        timezones.connect()
        notifications.connect()
        fleet.connect_web()  # a web process records itself at its first request (its workflows, for errors)
