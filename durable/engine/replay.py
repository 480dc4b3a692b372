"""Replay of a visit's recorded calls (invariant 5, docs/invariants.md), and what a replay mismatch says.

A visit that runs again (after a crash, a retry, a wait, a decision) is answered from what it recorded. When the
code now asks for something else than history holds (another call at a position, a side effect with another
request, another route or approval), that is a replay mismatch: the run is held on its version with the
difference shown, never failed (docs/replay-contract.md, "What may change inside a step while a run waits").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable.engine.errors import ReplayContractViolation
from durable.engine.json_values import storable_text

SHOWN_CHARS = 200  # of each recorded and new value, in the run's error and the reports


@dataclass(frozen=True)
class RecordedCall:
    call_index: int
    name: str
    result: Any


@dataclass(frozen=True)
class Mismatch:
    """Where a re-executed visit asked for something else than it recorded: the recorded and the new."""

    step: str
    visit: int  # the seq of the checkpoint the visit started from
    what: str  # call, side_effect, route, approval, patch
    call: str  # "call #2", "side effect 'send_email' for T-1", "route"
    recorded: Any
    new: Any

    @property
    def message(self) -> str:
        return storable_text(
            f"step {self.step!r} (visit {self.visit}) {self.call}: history recorded {_shown(self.recorded)}, "
            f"the code now asks {_shown(self.new)}; the step's code changed since this run recorded it "
            "(docs/replay-contract.md): restore what it asked, or guard the change with ctx.patched(...), "
            "then resume the run")

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "visit": self.visit, "what": self.what, "call": self.call,
                "recorded": _json(self.recorded), "new": _json(self.new)}


class ReplayMismatch(ReplayContractViolation):
    """A re-executed visit asked for something else than it recorded: the run is held, not failed.

    Not an OperationConflict: a step that catches conflicts (to tell a model) must not swallow a code change.
    """

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(mismatch.message)
        self.mismatch = mismatch


def payload_difference(recorded: Any, new: Any) -> tuple[Any, Any]:
    """The parts of two payloads that differ: for two dicts, only the keys whose values differ."""
    if not (isinstance(recorded, dict) and isinstance(new, dict)):
        return recorded, new
    keys = sorted(set(recorded) | set(new), key=str)
    changed = [key for key in keys if recorded.get(key, _ABSENT) != new.get(key, _ABSENT)]
    return ({key: recorded.get(key, "<absent>") for key in changed},
            {key: new.get(key, "<absent>") for key in changed})


_ABSENT = object()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def _json(value: Any) -> Any:
    """The value as the run's error may hold it: JSON scalars and containers, long text cut."""
    if isinstance(value, str):
        return storable_text(value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "...")
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(key): _json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(item) for item in value]
    return _json(repr(value))


class ReplayCursor:
    """Hands out the n-th recorded call of a step, checking it is the call the code now makes.

    It also keeps the visit's first replay mismatch, so that a step that catches the error (or turns it into
    another) is held all the same.
    """

    def __init__(self, step: str, recorded: list[RecordedCall], visit: int = 0) -> None:
        self.step = step
        self.visit = visit
        self._recorded = {call.call_index: call for call in recorded}
        self._next_index = 0
        self.reused_calls: list[RecordedCall] = []  # handed out so far: a step that reused any is a replay
        self.mismatch: Mismatch | None = None
        self.prepared: set[str] = set()  # the operations this execution of the visit prepared (side_effects.py)

    def next_call(self, name: str) -> tuple[int, RecordedCall | None]:
        """Return this call's index and its recorded result, if history has one."""
        index = self._next_index
        self._next_index += 1
        recorded = self._recorded.get(index)
        if recorded is not None and recorded.name != name:
            raise self.mismatched(Mismatch(self.step, self.visit, "call", f"call #{index}", recorded.name, name))
        if recorded is not None:
            self.reused_calls.append(recorded)
        return index, recorded

    def mismatched(self, mismatch: Mismatch) -> ReplayMismatch:
        """Keep the visit's first mismatch; the error to raise for it."""
        if self.mismatch is None:
            self.mismatch = mismatch
        return ReplayMismatch(mismatch)

    @property
    def next_index(self) -> int:
        return self._next_index

    @property
    def records_ahead(self) -> bool:
        """Has the visit recorded calls past the point its code has reached now?"""
        return any(index >= self._next_index for index in self._recorded)

    @property
    def reused(self) -> int:
        return len(self.reused_calls)

    @property
    def replayed_all(self) -> bool:
        return self._next_index >= len(self._recorded)


def history_goes_past(cursor: ReplayCursor, visit_operations: set[str], approval_positions: set[int],
                      approvals_asked: int, parked_at: int | None = None) -> bool:
    """Did an earlier execution of this visit get past the point its code has reached now (Temporal's "replaying")?

    It did if it recorded a call this execution has not reached (`cursor`), prepared a side effect this execution has
    not asked yet (`visit_operations`, the visit's ledger rows, less `cursor.prepared`), asked an approval past the
    `approvals_asked` this execution asked (`approval_positions`), or parked on a wait at a call index not reached
    (`parked_at`). `ctx.patched` answers False there without a recorded answer: that execution ran code without the
    patch past this point; True where nothing ran past it (docs/workflow-versions.md, "Patches")."""
    return (cursor.records_ahead or bool(visit_operations - cursor.prepared)
            or any(position > approvals_asked for position in approval_positions)
            or (parked_at is not None and parked_at >= cursor.next_index))
