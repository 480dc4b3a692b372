"""The console's roles: Django groups with permissions, created by a migration.

A user may hold several roles. Every view and endpoint checks a permission, never a role
name, so a deployment can compose its own groups from the same permissions.
"""
from __future__ import annotations

VIEW = (
    "durable.view_run", "durable.view_checkpoint", "durable.view_journalentry", "durable.view_sideeffect",
    "durable.view_operatoraction", "approvals.view_approvalrequest", "approvals.view_approvaldecision",
    "durable.view_schedule",
)
DECIDE = ("approvals.decide_approvalrequest",)
RESOLVE = ("durable.resolve_sideeffect",)
TOKENS = ("durable.manage_apitoken",)  # create and revoke anyone's API tokens (everyone manages their own)
# Everyone's notification deliveries and their attempts, in the admin (everyone sees their own on /notifications/).
NOTIFICATIONS = ("durable.view_notificationevent", "durable.view_notificationdelivery", "durable.view_deliveryattempt")
STEER = ("durable.start_run", "durable.cancel_run", "durable.retry_run", "durable.resume_run", "durable.migrate_run",
         "durable.send_event",  # an event wakes a waiting run: steering it, like a retry
         "durable.pause_run",  # pause and resume a run, or every run of a workflow (its kill switch)
         "durable.fork_run")  # a new run from a checkpoint of any run, its family's ledger kept
SPEND = ("durable.raise_budget",)  # let a run stopped by its budget spend more on model calls
# A webhook's service account: it sends events to runs and reads the status of the runs it sent events to (never
# their contents, nor the events' payloads; durable/api/permissions.py, SENDERS_READ); it cannot list runs, start,
# cancel, retry or steer them otherwise, nor decide or resolve anything.
SEND = ("durable.send_event",)
SCHEDULE = ("durable.manage_schedule",)  # create, edit, pause and delete schedules (durable/schedules.py)

VIEWER, APPROVER, RECONCILER, OPERATOR, ADMIN = "viewer", "approver", "reconciler", "operator", "admin"
WEBHOOK = "webhook"
ROLES: dict[str, tuple[str, ...]] = {
    VIEWER: VIEW,  # read everything
    APPROVER: VIEW + DECIDE,  # decide approvals
    RECONCILER: VIEW + RESOLVE,  # resolve UNKNOWN operations
    OPERATOR: VIEW + STEER + SPEND + SCHEDULE,  # start, cancel, retry, resume, migrate runs; raise a run's budget
    ADMIN: VIEW + DECIDE + RESOLVE + STEER + SPEND + TOKENS + NOTIFICATIONS + SCHEDULE,  # all of it; the admin site also needs is_staff
    WEBHOOK: SEND,  # a service account's: send events, read the runs it sent them to; nothing else
}


def ensure_roles() -> None:
    """Create or update the role groups from ROLES (the migration did this once; tests that
    flush the database, and deployments that changed ROLES, call it again)."""
    from django.contrib.auth.models import Group, Permission
    from django.db.models import Q

    for role, names in ROLES.items():
        query = Q(pk__in=[])
        for name in names:
            app_label, codename = name.split(".")
            query |= Q(content_type__app_label=app_label, codename=codename)
        group, _ = Group.objects.get_or_create(name=role)
        group.permissions.set(Permission.objects.filter(query))
