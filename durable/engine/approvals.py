"""Approval rules without Django: statuses, the paths a run takes, quorum, and what changed.

An approval binds to the snapshot the approver saw (its hash) and to the approval object
(what exactly is approved: action, amount, target). Before the run acts, the workflow's
revalidation re-reads the business preconditions; if they no longer hold the approval is
INVALIDATED and the run takes its declared path instead (invariant 8, docs/invariants.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from durable.engine.ids import request_hash
from durable.engine.json_values import storable_copy, storable_text


class ApprovalStatus(StrEnum):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"
    INVALIDATED = "INVALIDATED"


APPROVAL_TRANSITIONS: dict[ApprovalStatus, frozenset[ApprovalStatus]] = {
    ApprovalStatus.PENDING: frozenset({ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED,
                                       ApprovalStatus.INVALIDATED}),
    # Approved, but the facts moved before the run acted on it.
    ApprovalStatus.APPROVED: frozenset({ApprovalStatus.INVALIDATED}),
    ApprovalStatus.REJECTED: frozenset(),
    ApprovalStatus.EXPIRED: frozenset(),
    ApprovalStatus.INVALIDATED: frozenset(),
}


def can_move(current: ApprovalStatus | str, target: ApprovalStatus | str) -> bool:
    return ApprovalStatus(target) in APPROVAL_TRANSITIONS[ApprovalStatus(current)]


class Path(StrEnum):
    """What a run does when its approval is invalidated or expires."""

    ASK_AGAIN = "ask_again"  # a new request with a freshly read snapshot
    FAIL = "fail"


class Verdict(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"

    @property
    def past_tense(self) -> str:
        """The word the journal and timeline use: "approved", "rejected"."""
        return {Verdict.APPROVE: "approved", Verdict.REJECT: "rejected"}[self]


def snapshot_hash(snapshot: dict[str, Any]) -> str:
    return request_hash({"snapshot": snapshot})


def object_hash(approval_object: dict[str, Any]) -> str:
    return request_hash({"approve": approval_object})


@dataclass(frozen=True)
class Revalidation:
    """What a workflow's revalidation found: the current values, and why they no longer hold."""

    current: dict[str, Any]
    problems: tuple[str, ...] = ()
    # How many distinct approvers the current facts call for (the workflow's own rule applied to `current`);
    # None when the workflow's count does not depend on the facts.
    approvers_required: int | None = None

    def __post_init__(self) -> None:
        # What the revalidation read is a fact, recorded on the request and in the journal whatever it holds.
        object.__setattr__(self, "current", storable_copy(self.current))
        object.__setattr__(self, "problems", tuple(
            storable_text(problem) if isinstance(problem, str) else problem for problem in self.problems))

    @property
    def holds(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Difference:
    key: str
    then: Any
    now: Any


def differences(snapshot: dict[str, Any], current: dict[str, Any]) -> list[Difference]:
    """Top-level keys whose value differs between the snapshot and the current values."""
    keys = list(snapshot) + [k for k in current if k not in snapshot]
    return [Difference(k, snapshot.get(k), current.get(k)) for k in keys if snapshot.get(k) != current.get(k)]


def approvers_needed(recorded: int, revalidated: int | None) -> int:
    """What a decision needs: the count the request was asked with, raised (never lowered) to what the facts
    re-read at decision time call for. An amount that grew under a request cannot be paid on fewer eyes."""
    return max(recorded, revalidated or 0)


@dataclass(frozen=True)
class Tally:
    """The decisions so far on one request, and how many distinct approvers it needs."""

    required: int
    approvers: frozenset[str] = field(default_factory=frozenset)

    def outcome_of(self, verdict: Verdict) -> ApprovalStatus:
        """The request's status once this (valid) decision is added."""
        if verdict == Verdict.REJECT:
            return ApprovalStatus.REJECTED
        return ApprovalStatus.APPROVED if len(self.approvers) + 1 >= self.required else ApprovalStatus.PENDING


class DecisionRefused(Exception):
    """A decision the rules do not allow; `code` says which rule."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def check_decider(*, user: str, run_starter: str | None, tally: Tally, verdict: Verdict) -> None:
    """Separation of duties: not the run's starter, and not the same approver twice."""
    if run_starter is not None and user == run_starter:
        raise DecisionRefused("you started this run, so you cannot decide its approval", "self_approval")
    if verdict == Verdict.APPROVE and user in tally.approvers:
        raise DecisionRefused(
            f"you already approved; this request needs {tally.required} different approvers", "same_approver")
