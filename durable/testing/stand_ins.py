"""Stand-in downstreams: a registered adapter answered by the test instead of the system behind it, every call
counted per Idempotency-Key (the operation id durable sends as the key)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durable.downstream import Downstream, DownstreamOutcome, get_downstream

Answer = Callable[[str, str, dict[str, Any]], dict[str, Any]]  # (key, business key, payload) -> the result


@dataclass(frozen=True)
class Call:
    """One call of a stand-in: the Idempotency-Key it carried, the business key, the payload, and whether the
    stand-in acted on it (False: it answered with what the key did before, as a downstream honouring keys does,
    or it failed before acting)."""

    key: str
    business_key: str
    payload: dict[str, Any]
    acted: bool


class StandIn:
    """Stands in for `adapter`'s downstream while the test runs: `execute` and `lookup` answer from here.

    It keeps the adapter's promises (`capabilities`): a downstream that honours keys acts once per key and
    answers a repeated key with its first answer; one that can be looked up finds what a key did. The test
    scripts what happens next: `fail_next(exc)` (nothing done), `lose_next_answer()` (done, the answer lost:
    a timeout after the downstream acted).
    """

    def __init__(self, adapter: Downstream, answer: Answer | None = None) -> None:
        self.adapter = adapter
        self.name = adapter.name
        self._answer = answer or (lambda key, business_key, payload: dict(payload))
        self.calls: list[Call] = []
        self.done: dict[str, DownstreamOutcome] = {}  # what each key did, for repeats and lookups
        self._next: list[BaseException | None] = []  # scripted: an error before acting, None for a lost answer

    # What the test reads.

    def calls_per_key(self) -> Counter[str]:
        """How many times each Idempotency-Key was sent."""
        return Counter(call.key for call in self.calls)

    def effects_per_key(self) -> Counter[str]:
        """How many times the downstream acted on each key: more than 1 is a duplicate business action."""
        return Counter(call.key for call in self.calls if call.acted)

    def duplicates(self) -> list[str]:
        return sorted(key for key, count in self.effects_per_key().items() if count > 1)

    @property
    def effects(self) -> int:
        return sum(self.effects_per_key().values())

    # What the test scripts.

    def fail_next(self, error: BaseException) -> None:
        """The next call raises `error` without acting (the downstream refused it, or never got it)."""
        self._next.append(error)

    def lose_next_answer(self) -> None:
        """The next call acts, then its answer is lost (a timeout after sending): durable cannot know."""
        self._next.append(None)

    # The adapter's side.

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        scripted = self._next.pop(0) if self._next else False
        if isinstance(scripted, BaseException):
            self.calls.append(Call(operation_id, business_key, payload, acted=False))
            raise scripted
        keeps_keys = self.adapter.capabilities.honours_idempotency_keys
        if keeps_keys and operation_id in self.done:
            self.calls.append(Call(operation_id, business_key, payload, acted=False))
            return self.done[operation_id]
        self.calls.append(Call(operation_id, business_key, payload, acted=True))
        ref = f"{self.name}-{len(self.calls)}"
        outcome = DownstreamOutcome(ref, {"ref": ref, **self._answer(operation_id, business_key, payload)})
        self.done.setdefault(operation_id, outcome)
        if scripted is None:
            raise TimeoutError(f"the stand-in for {self.name} acted on {operation_id}, and its answer was lost")
        return outcome

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        if not self.adapter.capabilities.can_lookup:
            raise NotImplementedError(f"{self.name} cannot be looked up")
        return self.done.get(operation_id)


class StandIns:
    """The stand-ins of one test, each put in its adapter's place and taken out when the test ends."""

    def __init__(self) -> None:
        self._installed: list[tuple[Downstream, dict[str, Any]]] = []

    def install(self, adapter: Downstream | str, answer: Answer | None = None) -> StandIn:
        found = get_downstream(adapter) if isinstance(adapter, str) else adapter
        if found is None:
            raise LookupError(f"no downstream named {adapter!r} is registered (durable.register_downstream)")
        stand_in = StandIn(found, answer)
        # The workflow holds the adapter object itself (`downstream=payments`) and the reconciler finds it by
        # name: the stand-in answers for that object, whichever way it is reached.
        own = {name: found.__dict__[name] for name in ("execute", "lookup") if name in vars(found)}
        self._installed.append((found, own))
        vars(found).update(execute=stand_in.execute, lookup=stand_in.lookup)
        return stand_in

    def remove_all(self) -> None:
        while self._installed:
            adapter, own = self._installed.pop()
            for name in ("execute", "lookup"):
                vars(adapter).pop(name, None)
            vars(adapter).update(own)
