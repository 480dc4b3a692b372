"""The approval gate behind `ctx.request_approval`: registered by the approvals app, never imported by the core.

The runtime runs steps; whether a human approved, and whether that approval still holds, is the approvals
app's to decide. It registers its gate here from `ApprovalsConfig.ready()`. A project without the app gets
a step that fails, non-retryably, with an error saying which app to install: a run never waits for a
decision nobody can make.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from uuid import UUID

from durable.engine.approvals import Path
from durable.engine.errors import NonRetryableError
from durable.store import Lease, RunStore


@dataclass(frozen=True)
class GateSite:
    """Where a step asks: the run, the step, and the lease every write of the gate is fenced on."""

    store: RunStore
    lease: Lease
    run_id: UUID
    step: str
    workflow_name: str
    workflow_version: int
    business_key: str
    visit: int = 0  # the seq of the checkpoint the visit started from
    position: int = 1  # the n-th request_approval of the visit: each settles on its own


@dataclass(frozen=True)
class ApprovalAsk:
    """What the step asks for, as it passed it to `ctx.request_approval` (the gate checks it)."""

    kind: str
    snapshot: dict[str, Any] | Callable[[], dict[str, Any]]
    approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    revalidate: Callable[[dict[str, Any]], Any]
    expires_in: timedelta
    on_invalid: Path
    on_expiry: Path
    approvers: int | Callable[[dict[str, Any]], int]


class ApprovalGate(Protocol):
    def __call__(self, site: GateSite, ask: ApprovalAsk) -> dict[str, Any]:
        """Return the approval once it holds, or raise AwaitingApproval (the run waits) or a refusal."""


class ApprovalsNotInstalled(NonRetryableError):
    def __init__(self) -> None:
        super().__init__('ctx.request_approval needs the "approvals" app: add "approvals" to INSTALLED_APPS '
                         "(docs/embedding.md)", kind="approvals_not_installed")


_approval_gate: ApprovalGate | None = None


def register_approval_gate(gate: ApprovalGate) -> None:
    """Called from the approvals app's ready(); a second registration replaces the first (tests swap it)."""
    global _approval_gate
    _approval_gate = gate


def approval_gate() -> ApprovalGate:
    if _approval_gate is None:
        raise ApprovalsNotInstalled()
    return _approval_gate
