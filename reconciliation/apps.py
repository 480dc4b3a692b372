from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register with the core what this app adds to it (docs/architecture.md): the core never imports it."""
        from durable.console.live import nav_count
        from durable.console.nav import NavEntry, add_to_nav
        from durable.console.pages import Page, add_page
        from durable.console.search import add_finder
        from durable.mounts import Mount, mount
        from durable.runtime.sweeper import SweepTask, add_to_sweep
        from reconciliation.badge import unknown_badge
        from reconciliation.search import operation_by_id
        from reconciliation.sweeper import reconcile_stale

        # Before approvals' task (order 20), as the sweeper has always run and reported them.
        add_to_sweep("reconciliation", SweepTask(order=10, run=reconcile_stale, done="reconciled {} stale operation(s)"))
        mount("reconciliation", Mount("reconciliation/", "reconciliation.urls", api_urls="reconciliation.api.urls"))
        add_page("operation", Page("reconciliation:operation"))
        add_page("operations", Page("reconciliation:operations"))
        add_to_nav("reconciliation", NavEntry(link="reconciliation/_nav.html", badge="reconciliation/_nav_badge.html"))
        nav_count(unknown_badge)  # every live screen's version counts the header's badge
        add_finder("reconciliation", operation_by_id)  # the console search finds an operation by its id
