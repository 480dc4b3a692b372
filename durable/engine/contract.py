"""The replay contract: may this worker resume this run? If not, why, in words (invariant 7)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable.engine.fingerprint import StepShape
from durable.engine.json_values import storable_text
from durable.engine.topology import describe_changes

PINNABLE = ("tool_catalog_version", "prompt_release", "model_policy_version")
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Contract:
    """What a run is pinned to, or what a worker's registered version offers."""

    workflow_name: str
    workflow_version: int
    fingerprint: str
    topology: tuple[StepShape, ...]
    releases: Mapping[str, str] = field(default_factory=dict)  # tool catalog, prompt release, model policy


@dataclass(frozen=True)
class Refusal:
    kind: str  # version_missing, topology_changed, release_changed, schema_unreadable
    message: str

    def __post_init__(self) -> None:
        # It becomes the run's error; it may quote an upcaster's exception or a call's name from workflow code.
        object.__setattr__(self, "message", storable_text(self.message))

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message}


def check_contract(run: Contract, worker: Contract | None, pinned: Sequence[str] = ()) -> Refusal | None:
    """None when the worker's version is the run's, shape and pinned releases alike."""
    label = f"{run.workflow_name} v{run.workflow_version}"
    if worker is None:
        return Refusal("version_missing", f"this worker has no {label}; deploy it again, or migrate the run "
                                          "to a version that declares a migration from it")
    if worker.fingerprint != run.fingerprint:
        changes = describe_changes(run.topology, worker.topology) if run.topology else []
        what = "; ".join(changes) or "its topology fingerprint differs"
        return Refusal("topology_changed", f"{label} changed since this run started: {what}")
    for name in pinned:
        then, now = run.releases.get(name, ""), worker.releases.get(name, "")
        if then != now:
            return Refusal("release_changed", f"{label} pins {name}: the run started under {then!r}, "
                                              f"this worker has {now!r}")
    return None


def upcast(state: dict[str, Any], from_version: int, to_version: int,
           upcasters: Mapping[int, Upcaster]) -> dict[str, Any] | Refusal:
    """Bring a checkpoint's state from its schema version to the worker's, one step at a time."""
    if from_version > to_version:
        return Refusal("schema_unreadable", f"checkpoint schema v{from_version} is newer than this worker's "
                                            f"v{to_version}")
    for version in range(from_version, to_version):
        step = upcasters.get(version)
        if step is None:
            return Refusal("schema_unreadable", f"checkpoint schema v{from_version} needs an upcaster from "
                                                f"v{version} to v{version + 1}, and none is declared")
        state = step(state)
    return state
