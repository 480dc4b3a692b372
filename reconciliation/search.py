"""The console search finds an operation by its id (added from ReconciliationConfig.ready())."""
from __future__ import annotations

from django.urls import reverse

from durable.console.search import OPERATION_ID, Hit
from durable.models import SideEffect
from durable.permissions import Caller, can_see_contents


def operation_by_id(text: str, user: Caller) -> list[Hit]:
    """The operation `text` names, under the contents rule (durable/permissions.py)."""
    if not OPERATION_ID.fullmatch(text) or not can_see_contents(user):
        return []
    return [Hit("operation", reverse("reconciliation:operation", args=[operation.operation_id]), "operation id",
                f"{operation.action_name}, {operation.status}", operation.run)
            for operation in SideEffect.objects.filter(operation_id=text).select_related("run")]
