"""Downstream adapters: how durable calls a system with side effects, and what it promises."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from durable.engine.errors import Classification, classify
from durable.engine.json_values import storable_copy
from durable.engine.ledger import Capabilities

REPAIRED = ("the downstream's answer held what the database cannot store (a NUL, a lone surrogate, NaN, Infinity or "
            "nesting past 100 levels): recorded with U+FFFD in place of such characters and null in place of the rest")


@dataclass(frozen=True)
class DownstreamOutcome:
    """What a downstream said it did: its own reference and the result to record.

    The action has happened, so its answer is recorded whatever it holds: what the database cannot store
    is replaced (durable.engine.json_values.storable_copy) and `repaired` says so, for the evidence.
    """

    external_ref: str
    result: dict[str, Any]
    repaired: bool = field(default=False, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        external_ref, result = storable_copy(self.external_ref), storable_copy(self.result)
        if external_ref is not self.external_ref or result is not self.result:
            object.__setattr__(self, "external_ref", external_ref)
            object.__setattr__(self, "result", result)
            object.__setattr__(self, "repaired", True)


# The name adapters written before the rename import: the same class (docs/embedding.md, "Paths that moved").
Outcome = DownstreamOutcome


def with_repair_noted(evidence: str, outcome: DownstreamOutcome) -> str:
    """The evidence recorded with an operation's success, saying when its answer had to be repaired."""
    if not outcome.repaired:
        return evidence
    return f"{evidence}; {REPAIRED}" if evidence else REPAIRED


class Downstream(Protocol):
    """An adapter. `execute` carries the operation id as the Idempotency-Key where honoured.

    It declares what durable may rely on (checked by `manage.py check --tag durable`):
    `capabilities` (keys, lookup, or crashes go to UNKNOWN), `client_retries` (the retries of
    its own HTTP client or SDK: 0, so that durable's retry policy is the only one), and
    `classify(exc)`, whether an error it raised is worth retrying. A timeout or dropped
    connection after sending is ambiguous (durable.engine.errors.is_ambiguous): durable
    retries it only with an idempotency key, and reconciles it otherwise.
    """

    name: str
    capabilities: Capabilities
    client_retries: int

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome: ...

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        """The external record of this operation, or None when it provably never happened."""
        ...

    def classify(self, exc: BaseException) -> Classification:
        """Retryable (429, transient 5xx, timeouts) or not (invalid, forbidden, rejected)."""
        ...


def classify_error(adapter: Downstream, exc: BaseException) -> Classification:
    """The adapter's own classification of an error it raised; durable's HTTP rules when it has none."""
    own = getattr(adapter, "classify", None)
    return own(exc) if callable(own) else classify(exc)


_downstreams: dict[str, Downstream] = {}


def register_downstream(adapter: Downstream) -> Downstream:
    """Make an adapter known by name, so the sweeper's reconciler can reach it too."""
    _downstreams[adapter.name] = adapter
    return adapter


def get_downstream(name: str) -> Downstream | None:
    return _downstreams.get(name)


def all_downstreams() -> list[Downstream]:
    """Every registered adapter, by name."""
    return [_downstreams[name] for name in sorted(_downstreams)]
