"""Test-only workflows, a scripted downstream and a simulated crash for the side-effect ledger tests."""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.utils import timezone
from pydantic import BaseModel

from durable import RetryPolicy, Workflow, register
from durable.downstream import DownstreamOutcome, get_downstream, register_downstream
from durable.engine.errors import Classification, classify
from durable.engine.ledger import Capabilities
from durable.models import Run
from durable.runtime import side_effects


class ProbeDownstream:
    """A downstream that records every call and answers as the test scripts it (`on_execute`).

    `on_execute(operation_id, business_key, payload)` may raise, or return an DownstreamOutcome; when it
    returns None the probe answers with its own reference `probe-<n>`.
    """

    name = "probe"
    capabilities = Capabilities(honours_idempotency_keys=True, can_lookup=False)
    client_retries = 0  # no client at all: the test scripts every answer

    def classify(self, exc: BaseException) -> Classification:
        return classify(exc)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.on_execute: Callable[[str, str, dict[str, Any]], DownstreamOutcome | None] | None = None

    def execute(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome:
        self.calls.append((operation_id, business_key, payload))
        answer = self.on_execute(operation_id, business_key, payload) if self.on_execute else None
        if answer is not None:
            return answer
        ref = f"probe-{len(self.calls)}"
        return DownstreamOutcome(ref, {"ref": ref, "charged": payload.get("amount")})

    def lookup(self, operation_id: str, business_key: str, payload: dict[str, Any]) -> DownstreamOutcome | None:
        raise NotImplementedError("the probe honours idempotency keys; it is never looked up")


probe = register_downstream(ProbeDownstream())


class ProbeInput(BaseModel):
    business_key: str = "B-1"
    amount: str = "10.00"


class ProbeState(ProbeInput):
    charge: dict[str, Any] | None = None


# One side-effecting step, then a plain one: the charge's checkpoint is seq 1.
ledger_probe = register(Workflow(
    name="test-ledger-probe", version=1, state=ProbeState, input=ProbeInput,
    retry=RetryPolicy(max_attempts=3, initial_interval=0.01, max_interval=0.05),
))


@ledger_probe.step(side_effects=["charge"])
def charge(ctx: Any, state: ProbeState) -> ProbeState:
    state.charge = ctx.side_effect("charge", business_key=state.business_key, downstream=get_downstream("probe"),
                                   payload={"amount": state.amount})
    return state


@ledger_probe.step
def after_charge(ctx: Any, state: ProbeState) -> ProbeState:
    return state


# A step that performs a side effect it never declared (so the topology fingerprint misses it).
undeclared = register(Workflow(name="test-ledger-undeclared", version=1, state=ProbeState, input=ProbeInput))


@undeclared.step
def sneaky_charge(ctx: Any, state: ProbeState) -> ProbeState:
    state.charge = ctx.side_effect("charge", business_key=state.business_key, downstream=get_downstream("probe"),
                                   payload={"amount": state.amount})
    return state


class SimulatedCrash(BaseException):
    """Escapes the executor like a SIGKILL would: nothing after the fault point runs."""


def crash_at(monkeypatch: Any, point: str, action: str) -> None:
    """Make the worker 'die' once at `point` of operation `action` (as an armed fault point would).

    durable.runtime.side_effects imports fault_point by name, so that is the name to replace.
    """
    real = side_effects.fault_point
    wanted, fired = action, []

    def fault_point(at: str, *, operation_id: str, action: str) -> None:
        if at == point and action == wanted and not fired:
            fired.append(operation_id)
            raise SimulatedCrash(f"worker killed at {at} of {action} {operation_id}")
        real(at, operation_id=operation_id, action=action)

    monkeypatch.setattr(side_effects, "fault_point", fault_point)


def crash_before_checkpoint(monkeypatch: Any, seq: int) -> None:
    """Make the worker 'die' once as the visit that started from checkpoint `seq` writes its checkpoint: what
    the visit recorded (its activities) is kept, its checkpoint is not, so the visit is re-executed."""
    from django.db import connection

    from durable.store import base, postgres

    store = postgres.PostgresRunStore if connection.vendor == "postgresql" else base.RunStore
    original, fired = store.commit_step, []

    def commit_step(self: Any, lease: Any, *args: Any) -> Any:
        if lease.seq == seq and not fired:
            fired.append(seq)
            raise SimulatedCrash(f"worker killed before the checkpoint of the visit from checkpoint #{seq}")
        return original(self, lease, *args)

    monkeypatch.setattr(base.RunStore, "commit_step", commit_step)
    monkeypatch.setattr(postgres.PostgresRunStore, "commit_step", commit_step)


def expire_lease(run: Run) -> None:
    """The crashed worker's lease runs out, so another worker (or the sweeper) may take the run."""
    Run.objects.filter(id=run.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def make_retry_due(run: Run) -> None:
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now())
