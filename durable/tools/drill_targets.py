"""What the fault drill drills against: stand-ins for a workflow's downstreams that count what took effect, and
the input of each run. The demo's is durable's sandbox; a host project writes one for its own workflows
(docs/fault-drill.md#drilling-a-host-projects-workflows) and names it with `durable_drill --target`.
"""
from __future__ import annotations

from typing import Any, Protocol

from django.utils.module_loading import import_string

from durable.tools.sandbox import SandboxServer

SANDBOX = "durable.tools.drill_targets.SandboxTarget"


class DrillTarget(Protocol):
    """One cell's world: made anew for each cell, started before its workers, stopped after they are gone."""

    def start(self) -> dict[str, Any]:
        """Start the stand-ins; return the settings that point the drilled workflow's downstreams at them. The
        drill sets them in its own process (where it revalidates approvals) and in each of its workers."""

    def stop(self) -> None:
        """Stop the stand-ins (called once the cell's workers are gone and everything is counted)."""

    def runs(self, count: int, tag: str) -> list[tuple[str, dict[str, Any]]]:
        """A business key and an input for each of `count` runs, each with what it acts on put in the stand-ins
        (an order of its own to refund). `tag` is digits unique to the cell: keys never repeat across cells or
        drills, so no run answers a start with an earlier drill's run still active on the same key."""

    def effects(self) -> dict[str, dict[str, int]]:
        """What took effect, as the stand-ins counted it: per downstream (its registered name), the number of
        effects per Idempotency-Key, which is the operation id."""


def load_target(path: str) -> DrillTarget:
    """The target class (or factory) at the dotted `path`, made for one cell."""
    target: DrillTarget = import_string(path)()
    return target


class SandboxTarget:
    """The demo's world: durable's sandbox (orders, payments, tickets, notifications, a chat model) over HTTP, for
    the workflows whose input is {"order_id": "ORD-<n>", "customer_message": "..."} (claims-agent, support-agent)."""

    # Asks for a refund (both agents), and for a receipt: the support agent then sends two emails at once.
    MESSAGE = "{order_id} arrived broken, please refund it and send me the receipt"

    def __init__(self) -> None:
        self.sandbox = SandboxServer()

    def start(self) -> dict[str, Any]:
        self.sandbox.start()
        return {"DURABLE_SANDBOX_URL": self.sandbox.url}

    def stop(self) -> None:
        self.sandbox.stop()

    def runs(self, count: int, tag: str) -> list[tuple[str, dict[str, Any]]]:
        return [(order_id, {"order_id": order_id, "customer_message": self.MESSAGE.format(order_id=order_id)})
                for order_id in seed_orders(self.sandbox, f"ORD-{tag}", count)]

    def effects(self) -> dict[str, dict[str, int]]:
        # The demo's downstreams are named after the sandbox's services (payments, tickets, notifications).
        return {service: dict(counters["effects_by_key"])
                for service, counters in self.sandbox.state.calls_snapshot().items()}


def seed_orders(sandbox: SandboxServer, prefix: str, runs: int) -> list[str]:
    """One order per run, so each run has business keys of its own."""
    orders = [f"{prefix}{i:05d}" for i in range(runs)]
    for i, order_id in enumerate(orders):
        sandbox.state.upsert_order({"order_id": order_id, "customer": f"Drill Customer {i}", "amount": "40.00",
                                    "currency": "EUR"})
    return orders
