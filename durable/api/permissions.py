"""Who may do what through the API: Django permissions on the Run model."""
from __future__ import annotations

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
    "migrate": "durable.migrate_run",
    "migrate_blocked": "durable.migrate_run",
}


class RunPermission(BasePermission):
    """Logged in, and holding the permission the action needs; unknown actions are refused."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        needed = ACTION_PERMISSIONS.get(getattr(view, "action", None) or "")
        return needed is not None and request.user.has_perm(needed)
