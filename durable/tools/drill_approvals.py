"""The drill's own approver: it approves what the drill's runs ask for, and nothing else (invariant 14).

An account of the drill's own, one per invocation, holding the approver role (`durable-tool-drill-approver-<hex>`,
no usable password, deactivated when the drill ends), decides through the approvals app's own decision, the one
the console and the API call: the snapshot it saw must be the request's, the facts are re-read (a request whose
facts moved is invalidated, not approved), the database's clock judges the deadline, one decision per person,
and the audit trail names the account. It looks only at requests of runs the drill's own starting account
created, among the cell's runs; it is never the starter, so separation of duties holds as for a person.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from django.contrib.auth.models import Group, Permission

from approvals.models import ApprovalRequest
from approvals.services import decide
from durable.engine.approvals import ApprovalStatus, Verdict
from durable.engine.states import RunStatus
from durable.errors import Conflict, Unavailable
from durable.roles import APPROVER, DECIDE
from durable.tools.workload import retire, tool_account

REASON = "durable_drill approves the approvals of the runs it started, to drill what the run does next"


class DrillApprover:
    """Approves the pending requests of the runs `starter` created, as many accounts as each request needs."""

    def __init__(self, starter: Any) -> None:
        self.starter = starter
        self.accounts: list[Any] = []
        self.decided = 0

    def approve_pending(self, run_ids: Sequence[UUID]) -> int:
        """Approve every request now pending on a run of `run_ids` that waits for it; returns how many decisions."""
        pending = list(ApprovalRequest.objects.filter(
            run_id__in=list(run_ids), run__created_by=self.starter, run__status=RunStatus.WAITING_APPROVAL,
            status=ApprovalStatus.PENDING).order_by("created_at"))
        made = sum(self._approve(request) for request in pending)
        self.decided += made
        return made

    def _approve(self, request: ApprovalRequest) -> int:
        made = 0
        already = set(request.decisions.values_list("user_id", flat=True))
        for account in self._accounts(request.approvers_required):
            if account.pk in already:
                continue
            try:
                decide(request_id=request.id, user=account, verdict=Verdict.APPROVE,
                       snapshot_hash=request.snapshot_hash, reason=REASON, source="command")
            except (Conflict, Unavailable):
                # Decided, expired or invalidated meanwhile (the run asks again), or its facts could not be read
                # right now: the drill looks again at its next tick, as a person would reload the page.
                return made
            made += 1
        return made

    def _accounts(self, needed: int) -> list[Any]:
        while len(self.accounts) < needed:
            self.accounts.append(approver_account())
        return self.accounts[:needed]

    def retire(self) -> None:
        for account in self.accounts:
            retire(account)


def approver_account() -> Any:
    """A tool account holding the approver role: its group where the deployment keeps it, else its permission."""
    account = tool_account("drill-approver")
    group = Group.objects.filter(name=APPROVER).first()
    if group is not None:
        account.groups.add(group)
    else:
        app_label, codename = DECIDE[0].split(".")
        account.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return type(account).objects.get(pk=account.pk)  # a fresh instance: no permission cache from before the grant
