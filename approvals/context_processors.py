"""The pending-approvals count for the top navigation."""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from approvals.selectors import pending_count

VIEW_PERMISSION = "approvals.view_approvalrequest"


def pending_approvals(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.has_perm(VIEW_PERMISSION):
        return {}
    # Lazy: htmx fragments never show the badge, so they should not pay for the COUNT.
    return {"pending_approvals": SimpleLazyObject(pending_count)}
