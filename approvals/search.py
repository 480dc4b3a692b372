"""The console search finds an approval request by its UUID (added from ApprovalsConfig.ready())."""
from __future__ import annotations

from django.urls import reverse

from approvals.models import ApprovalRequest
from durable.console.search import Hit, as_uuid
from durable.permissions import Caller

VIEW_APPROVALS = "approvals.view_approvalrequest"


def approval_by_id(text: str, user: Caller) -> list[Hit]:
    """The request `text` names, for a searcher who may read requests."""
    request_id = as_uuid(text)
    if request_id is None or not user.has_perm(VIEW_APPROVALS):
        return []
    return [Hit("approval", reverse("approvals:detail", args=[approval.id]), "approval id",
                f"{approval.kind}, {approval.status}", approval.run)
            for approval in ApprovalRequest.objects.filter(id=request_id).select_related("run")]
