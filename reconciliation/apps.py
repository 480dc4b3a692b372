from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from durable.console.live import nav_count
        from reconciliation.badge import unknown_badge

        nav_count(unknown_badge)  # every live screen's version counts the header's badge
