"""Downstream adapters: how durable calls a system with side effects, and what it promises."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from durable.engine.ledger import Capabilities


@dataclass(frozen=True)
class Outcome:
    """What a downstream said it did: its own reference and the result to record."""

    external_ref: str
    result: dict[str, Any]


class Downstream(Protocol):
    """An adapter. `execute` carries the operation id as the Idempotency-Key where honoured.

    Errors carry their classification (durable.engine.errors.classify). A timeout or dropped
    connection after sending is ambiguous (durable.engine.errors.is_ambiguous): durable
    retries it only with an idempotency key, and reconciles it otherwise.
    """

    name: str
    capabilities: Capabilities

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> Outcome: ...

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> Outcome | None:
        """The external record of this operation, or None when it provably never happened."""
        ...


_downstreams: dict[str, Downstream] = {}


def register_downstream(adapter: Downstream) -> Downstream:
    """Make an adapter known by name, so the sweeper's reconciler can reach it too."""
    _downstreams[adapter.name] = adapter
    return adapter


def get_downstream(name: str) -> Downstream | None:
    return _downstreams.get(name)
