"""The benchmark's side effect: an in-process downstream that honours idempotency keys.

Every system calls the same `execute` in its own process, so the side-effect phase measures
each engine's bookkeeping around the call, not a network hop.
"""
from __future__ import annotations

from typing import Any

from durable.downstream import DownstreamOutcome, register_downstream
from durable.engine.errors import Classification, classify
from durable.engine.ledger import Capabilities

ACTION = "bench_charge"


class InProcessDownstream:
    """Remembers the outcome per idempotency key: a repeated key gets the first answer back."""

    name = "bench-in-process"
    capabilities = Capabilities(honours_idempotency_keys=True)
    client_retries = 0  # no client: a function call in this process

    def __init__(self) -> None:
        self.outcomes: dict[str, DownstreamOutcome] = {}
        self.calls = 0

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        self.calls += 1
        if operation_id not in self.outcomes:
            ref = f"charge-{len(self.outcomes) + 1}"
            self.outcomes[operation_id] = DownstreamOutcome(ref, {"ref": ref, "amount": payload.get("amount")})
        return self.outcomes[operation_id]

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        return self.outcomes.get(operation_id)

    def classify(self, exc: BaseException) -> Classification:
        return classify(exc)


downstream = register_downstream(InProcessDownstream())
