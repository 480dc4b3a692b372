"""Replay of recorded activity calls within one step (invariant 5, docs/invariants.md)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable.engine.errors import ReplayContractViolation


@dataclass(frozen=True)
class RecordedCall:
    call_index: int
    name: str
    result: Any


class ReplayCursor:
    """Hands out the n-th recorded call of a step, checking it is the call the code now makes."""

    def __init__(self, step: str, recorded: list[RecordedCall]) -> None:
        self.step = step
        self._recorded = {call.call_index: call for call in recorded}
        self._next_index = 0
        self.reused_calls: list[RecordedCall] = []  # handed out so far: a step that reused any is a replay

    def next_call(self, name: str) -> tuple[int, RecordedCall | None]:
        """Return this call's index and its recorded result, if history has one."""
        index = self._next_index
        self._next_index += 1
        recorded = self._recorded.get(index)
        if recorded is not None and recorded.name != name:
            raise ReplayContractViolation(
                f"step {self.step!r} call #{index} is {name!r} but history recorded {recorded.name!r}; "
                "the step's code changed its call order since this run recorded it"
            )
        if recorded is not None:
            self.reused_calls.append(recorded)
        return index, recorded

    @property
    def reused(self) -> int:
        return len(self.reused_calls)

    @property
    def replayed_all(self) -> bool:
        return self._next_index >= len(self._recorded)
