"""The UNKNOWN-operations count beside the navigation's Reconciliation link (and in every live screen's version)."""
from __future__ import annotations

from django.http import HttpRequest

from durable.engine.ledger import OperationStatus as Op
from durable.models import SideEffect
from durable.permissions import can_see_contents


def unknown_badge(request: HttpRequest) -> int | None:
    """How many operations wait for an operator to say whether they happened; None for a user who may not see
    the ledger. Counted once per request (an index-only scan of ledger_status_updated), for a live screen's
    version and for the badge it renders."""
    if not can_see_contents(request.user):
        return None
    if not hasattr(request, "unknown_operations"):
        request.unknown_operations = SideEffect.objects.filter(status=Op.UNKNOWN).count()  # type: ignore[attr-defined]  # counted once per request, kept on it
    return request.unknown_operations  # type: ignore[attr-defined]  # as above
