from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from approvals import checks  # noqa: F401  registers the revalidation check
        from approvals.context_processors import pending_badge
        from approvals.receivers import close_requests_of_cancelled_run
        from durable.console.live import nav_count
        from durable.signals import run_cancelled

        nav_count(pending_badge)  # every live screen's version counts the header's badge
        run_cancelled.connect(close_requests_of_cancelled_run, dispatch_uid="approvals.close_requests_of_cancelled_run")
