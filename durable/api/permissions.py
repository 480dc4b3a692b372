"""Who may do what through the API: Django permissions on the Run model."""
from __future__ import annotations

from rest_framework.exceptions import MethodNotAllowed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

ACTION_PERMISSIONS = {
    "list": "durable.view_run",
    "retrieve": "durable.view_run",
    "create": "durable.start_run",
    "cancel": "durable.cancel_run",
    "retry": "durable.retry_run",
    "resume": "durable.resume_run",
    "pause": "durable.pause_run",
    "fork": "durable.fork_run",
    "migrate": "durable.migrate_run",
    "budget": "durable.raise_budget",
    "migrate_blocked": "durable.migrate_run",
    "bulk": "durable.view_run",  # and then the permission of the action it names (durable/api/bulk.py)
    "events": "durable.view_run",  # the run's mailbox; payloads only under the contents rule
    "send_event": "durable.send_event",
}
# What a caller that may send events but not view runs (the webhook role) may still read: the runs it sent an event
# to (or started), listed, one by one, and their mailboxes (RunViewSet.get_queryset keeps only those runs: any other
# is 404, as a run that does not exist, and absent from the list).
SENDERS_READ = frozenset({"list", "retrieve", "events"})
VIEW_RUN, SEND_EVENT = "durable.view_run", "durable.send_event"


def reads_as_sender(request: Request, view: APIView) -> bool:
    """The caller reads a run only as one that sent it an event: it holds send_event, not view_run."""
    user = request.user
    return (getattr(view, "action", None) in SENDERS_READ and not user.has_perm(VIEW_RUN)
            and user.has_perm(SEND_EVENT))


def needed_permission(request: Request, view: APIView, permissions: dict[str, str]) -> str | None:
    """The permission the view's action needs. A method the viewset does not route (DELETE on a run, say)
    has no action: a logged-in client is told 405 with the Allow header, not a misleading 403."""
    action = getattr(view, "action", None)
    if action is None and request.user and request.user.is_authenticated:
        raise MethodNotAllowed(request.method or "")
    return permissions.get(action or "")


class ActionPermission(BasePermission):
    """Logged in, and holding the permission the viewset's action needs; unknown actions are refused.

    Each viewset says which permission each of its actions needs in `permissions`.
    """

    permissions: dict[str, str] = {}

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        needed = needed_permission(request, view, self.permissions)
        # DRF answers a refusal with `message`: it names what is missing (and goes to the security log).
        self.message = (f"this needs the {needed} permission, which your account lacks" if needed else
                        f"the action {getattr(view, 'action', None)!r} is not one this endpoint offers")
        return needed is not None and request.user.has_perm(needed)


class RunPermission(ActionPermission):
    permissions = ACTION_PERMISSIONS

    def has_permission(self, request: Request, view: APIView) -> bool:
        if super().has_permission(request, view):
            return True
        return bool(request.user and request.user.is_authenticated) and reads_as_sender(request, view)
