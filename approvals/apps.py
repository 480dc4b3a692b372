from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register with the core what this app adds to it (docs/architecture.md): the core never imports it."""
        from approvals import (
            checks,  # noqa: F401  registers the revalidation check
            overview,
            run_page,
        )
        from approvals.context_processors import pending_badge
        from approvals.exposition import approval_gauges
        from approvals.gate import request_approval
        from approvals.receivers import close_requests_of_cancelled_run
        from approvals.search import approval_by_id
        from approvals.services import sweep_approvals
        from durable.console.live import nav_count
        from durable.console.nav import NavEntry, add_to_nav
        from durable.console.overview import add_section
        from durable.console.pages import ObjectPage, add_page
        from durable.console.run_page import add_run_section
        from durable.console.search import add_finder
        from durable.exposition import add_gauges
        from durable.mounts import Mount, mount
        from durable.runtime.gates import register_approval_gate
        from durable.runtime.sweeper import SweepTask, add_to_sweep
        from durable.signals import run_cancelled

        register_approval_gate(request_approval)  # what ctx.request_approval asks
        add_to_sweep("approvals", SweepTask(order=20, run=sweep_approvals, done="expired {} approval(s)"))
        mount("approvals", Mount("approvals/", "approvals.urls", api_urls="approvals.api.urls"))
        add_page("approval", ObjectPage("approvals:detail", permission="approvals.view_approvalrequest"))
        add_to_nav("approvals", NavEntry(link="approvals/_nav.html", badge="approvals/_nav_badge.html"))
        nav_count(pending_badge)  # every live screen's version counts the header's badge
        add_section("approvals", overview.SECTION)  # requests waiting for people, decisions over the last day
        add_run_section("approvals", run_page.SECTION)  # the run's requests on its page
        add_finder("approvals", approval_by_id)  # the console search finds a request by its id
        add_gauges("approvals", approval_gauges)  # pending requests, their oldest age, the soonest expiry
        run_cancelled.connect(close_requests_of_cancelled_run, dispatch_uid="approvals.close_requests_of_cancelled_run")
