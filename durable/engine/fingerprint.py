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


def topology_fingerprint(steps: Sequence[StepShape]) -> str:
    """Ordered step identities with their declared side-effect actions, hashed."""
    return _fingerprint(tuple(steps))


@lru_cache(maxsize=1024)  # every claim checks its run's contract: the same few shapes, hashed once each
def _fingerprint(steps: tuple[StepShape, ...]) -> str:
    shape = [{"step": s.name, "side_effects": sorted(s.side_effects)} for s in steps]
    return sha256_hex(canonical_json(shape))[:32]
