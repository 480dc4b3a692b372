"""The shop's drill target: the fault drill runs shop-refund against a stand-in of the shop's service that counts
what took effect by Idempotency-Key (durable_drill --target tests.drill_target.ShopDrill, docs/fault-drill.md).

A real project's target starts whatever stands in for its downstreams where a crash may take effect twice: a
test double like this one, or a staging service whose effects it can count. Never production's downstreams.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from tests.shop_service import ShopService


class ShopDrill:
    def __init__(self) -> None:
        self.service = ShopService()

    def start(self) -> dict[str, Any]:
        """The stand-in's address, for the drill's process and its workers (host.settings reads this setting)."""
        self.service.__enter__()
        return {"SHOP_DOWNSTREAM_URL": self.service.url}

    def stop(self) -> None:
        self.service.__exit__()

    def runs(self, count: int, tag: str) -> list[tuple[str, dict[str, Any]]]:
        """One order of its own per run, to refund: SO-<tag><n>, as the workflow's input pattern wants."""
        made = []
        for i in range(count):
            order_id = f"SO-{tag}{i:05d}"
            self.service.state.add_order(order_id, "42.00")
            made.append((order_id, {"order_id": order_id, "reason": "durable_drill"}))
        return made

    def effects(self) -> dict[str, dict[str, int]]:
        """Refunds happen once per key (a repeated key gets the first refund back); every notice is one more."""
        with self.service.lock:
            state = self.service.state
            return {"shop-refunds": {key: 1 for key in state.refunds},
                    "shop-notices": dict(Counter(notice["key"] for notice in state.notices))}
