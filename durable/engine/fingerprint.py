"""Topology fingerprints: what a run is pinned to, computed from the workflow's shape."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from durable.engine.ids import canonical_json, sha256_hex


@dataclass(frozen=True)
class StepShape:
    name: str
    side_effects: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()  # the routes the step declares; empty: the implicit route (the next step)


def topology_fingerprint(steps: Sequence[StepShape]) -> str:
    """Ordered step identities with their declared side-effect actions and routes, hashed.

    Routes are hashed only when a step declares some, so a workflow without routes keeps the fingerprint
    it had before routes existed and its runs keep resuming."""
    return _fingerprint(tuple(steps))


@lru_cache(maxsize=1024)  # every claim checks its run's contract: the same few shapes, hashed once each
def _fingerprint(steps: tuple[StepShape, ...]) -> str:
    return sha256_hex(canonical_json([shape_json(s) for s in steps]))[:32]


def shape_json(step: StepShape) -> dict[str, object]:
    """A step's shape as the fingerprint hashes it and a run records it (routes only when declared)."""
    shape: dict[str, object] = {"step": step.name, "side_effects": sorted(step.side_effects)}
    if step.routes:
        shape["routes"] = sorted(step.routes)
    return shape
