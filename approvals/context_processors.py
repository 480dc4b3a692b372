"""The pending-approvals count for the top navigation (rendered, and in every live screen's version)."""
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
    # Lazy: a fragment that shows no badge does not pay for the COUNT.
    return {"pending_approvals": SimpleLazyObject(lambda: pending_badge(request))}


def pending_badge(request: HttpRequest) -> int | None:
    """What the badge shows this user (None for one who may not see approvals): counted once per request, for a
    live screen's version and for the badge it renders."""
    if not request.user.has_perm(VIEW_PERMISSION):
        return None
    if not hasattr(request, "pending_approvals"):
        request.pending_approvals = pending_count()  # type: ignore[attr-defined]  # counted once per request, kept on it
    return request.pending_approvals  # type: ignore[attr-defined]  # as above
