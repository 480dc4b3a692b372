"""The side-effect ledger's rules: operation statuses, their transitions, and what re-entry does."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OperationStatus(StrEnum):
    PENDING = "PENDING"  # prepared: id, hash and row exist; nothing sent
    STARTED = "STARTED"  # committed before the downstream is called: the crash window
    SUCCEEDED = "SUCCEEDED"
    FAILED_RETRYABLE = "FAILED_RETRYABLE"  # known not to have happened; may be tried again, same key
    FAILED_FINAL = "FAILED_FINAL"
    UNKNOWN = "UNKNOWN"  # the machine cannot know; only an operator resolves it


OP_TRANSITIONS: dict[OperationStatus, frozenset[OperationStatus]] = {
    OperationStatus.PENDING: frozenset({OperationStatus.STARTED}),
    OperationStatus.STARTED: frozenset({
        OperationStatus.STARTED,  # re-sent with the same key after a crash
        OperationStatus.SUCCEEDED, OperationStatus.FAILED_RETRYABLE, OperationStatus.FAILED_FINAL,
        OperationStatus.UNKNOWN,
    }),
    OperationStatus.FAILED_RETRYABLE: frozenset({OperationStatus.STARTED}),
    # Only an operator moves an UNKNOWN operation, and never the machine to a failure on its own.
    OperationStatus.UNKNOWN: frozenset({OperationStatus.SUCCEEDED, OperationStatus.FAILED_RETRYABLE,
                                        OperationStatus.FAILED_FINAL}),
    OperationStatus.SUCCEEDED: frozenset(),
    OperationStatus.FAILED_FINAL: frozenset(),
}


def can_move(current: OperationStatus | str, target: OperationStatus | str) -> bool:
    return OperationStatus(target) in OP_TRANSITIONS[OperationStatus(current)]


@dataclass(frozen=True)
class Capabilities:
    """What a downstream promises: it honours Idempotency-Keys; its records can be looked up.

    A downstream that can do neither declares `unknown_on_crash=True`: a crash after its
    request may have gone out leaves the operation UNKNOWN, and an operator settles it. The
    ledger does that either way; the declaration says the team knows and staffs for it.
    """

    honours_idempotency_keys: bool = False
    can_lookup: bool = False
    unknown_on_crash: bool = False

    @property
    def can_settle(self) -> bool:
        """Can the machine itself find out whether a possibly-sent operation happened?"""
        return self.honours_idempotency_keys or self.can_lookup

    @property
    def settles_crashes(self) -> bool:
        """Is it said what happens to an operation whose worker crashed mid-call?"""
        return self.can_settle or self.unknown_on_crash


def after_failed_call(*, answered: bool, retryable: bool, may_have_happened: bool,
                      capabilities: Capabilities) -> OperationStatus:
    """The status a call that raised leaves its operation in (invariants 3 and 4).

    `answered`: the downstream answered, or the request never left (not ambiguous).
    `may_have_happened`: the call re-sent, with the same key, an operation an earlier attempt may
    have performed. An answer settles the call, except a retryable refusal (429, 503) of such a
    re-send: it is refused before the key is looked at, so it says nothing of the earlier attempt.
    What may have happened stays STARTED while keys or a lookup can settle it, else is UNKNOWN.
    """
    if answered and not (retryable and may_have_happened):
        return OperationStatus.FAILED_RETRYABLE if retryable else OperationStatus.FAILED_FINAL
    if capabilities.can_settle:
        return OperationStatus.STARTED
    return OperationStatus.UNKNOWN


class Reentry(StrEnum):
    """What to do when a step meets an operation that already has a ledger row."""

    RETURN_RECORDED = "return_recorded"  # SUCCEEDED: a duplicate prevented
    TAKE_RESOLUTION = "take_resolution"  # SUCCEEDED by an operator's resolution: what they recorded, no duplicate
    EXECUTE = "execute"  # PENDING or FAILED_RETRYABLE: send it (with the same key)
    RECONCILE = "reconcile"  # STARTED: it may have happened; find out before anything else
    FAIL_STEP = "fail_step"  # FAILED_FINAL
    NEEDS_ATTENTION = "needs_attention"  # UNKNOWN: wait for an operator
    WAIT_FOR_FAMILY = "wait_for_family"  # a fork: another run of its family may still send it; ask again later


def on_reentry(status: OperationStatus | str, *, resolved_by_hand: bool = False) -> Reentry:
    """`resolved_by_hand`: an operator settled the row. Its SUCCEEDED is then the operator's answer, which the
    step takes when the run goes on; no call was about to be repeated, so no duplicate was prevented."""
    if resolved_by_hand and OperationStatus(status) is OperationStatus.SUCCEEDED:
        return Reentry.TAKE_RESOLUTION
    return {
        OperationStatus.SUCCEEDED: Reentry.RETURN_RECORDED,
        OperationStatus.PENDING: Reentry.EXECUTE,
        OperationStatus.FAILED_RETRYABLE: Reentry.EXECUTE,
        OperationStatus.STARTED: Reentry.RECONCILE,
        OperationStatus.FAILED_FINAL: Reentry.FAIL_STEP,
        OperationStatus.UNKNOWN: Reentry.NEEDS_ATTENTION,
    }[OperationStatus(status)]


def in_family(status: OperationStatus | str, *, resolved_by_hand: bool = False) -> Reentry:
    """What a fork does with the operation another run of its family left (the same action and business key).

    SUCCEEDED: the recorded result, nothing sent ("done in run <origin>"); FAILED_FINAL fails the step as it would
    there; UNKNOWN holds the fork for the operator who resolves it there. Anything else (STARTED, or prepared and not
    settled) is that run's to send or settle, never the fork's to send beside it: the fork asks again later."""
    reentry = on_reentry(status, resolved_by_hand=resolved_by_hand)
    if reentry in (Reentry.RETURN_RECORDED, Reentry.TAKE_RESOLUTION, Reentry.FAIL_STEP, Reentry.NEEDS_ATTENTION):
        return reentry
    return Reentry.WAIT_FOR_FAMILY


class Reconciliation(StrEnum):
    """How a STARTED (maybe sent) operation is settled, what the reconciler decided (invariant 3, docs/invariants.md).

    `reconciliation_for` chooses the path from the downstream's capabilities: RETRY_SAME_KEY, LOOK_UP or
    UNKNOWN. A lookup ends FOUND or NOT_FOUND. Those four DECISIONS are what the journal and the
    reconciliation_total metric record. CANNOT_LOOK_UP is an operator's question that no adapter can answer
    (the resolution screen's), never a decision.
    """

    RETRY_SAME_KEY = "retry_same_key"
    LOOK_UP = "look_up"
    FOUND = "found"
    NOT_FOUND = "not_found"
    UNKNOWN = "unknown"
    CANNOT_LOOK_UP = "cannot_look_up"


DECISIONS = frozenset({Reconciliation.RETRY_SAME_KEY, Reconciliation.FOUND, Reconciliation.NOT_FOUND,
                       Reconciliation.UNKNOWN})


def reconciliation_for(capabilities: Capabilities) -> Reconciliation:
    if capabilities.honours_idempotency_keys:
        return Reconciliation.RETRY_SAME_KEY
    if capabilities.can_lookup:
        return Reconciliation.LOOK_UP
    return Reconciliation.UNKNOWN
