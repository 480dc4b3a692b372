"""Readable differences between the topology a run started with and the one a worker has."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durable.engine.fingerprint import StepShape, shape_json


def shapes_from_json(data: Sequence[Mapping[str, Any]]) -> list[StepShape]:  # as shapes_to_json wrote it
    return [StepShape(str(item["step"]), tuple(item.get("side_effects", ())), tuple(item.get("routes", ())))
            for item in data]


def shapes_to_json(shapes: Sequence[StepShape]) -> list[dict[str, object]]:
    return [shape_json(s) for s in shapes]


def describe_changes(old: Sequence[StepShape], new: Sequence[StepShape]) -> list[str]:
    """What changed, in an operator's words: inserted, removed, renamed, reordered, side effects, routes."""
    old_names, new_names = [s.name for s in old], [s.name for s in new]
    changes: list[str] = []
    removed = [n for n in old_names if n not in new_names]
    inserted = [n for n in new_names if n not in old_names]
    if len(removed) == len(inserted) == 1 and old_names.index(removed[0]) == new_names.index(inserted[0]):
        changes.append(f"step {removed[0]!r} was renamed to {inserted[0]!r}")
    else:
        changes += [f"step {n!r} was inserted at position {new_names.index(n) + 1}" for n in inserted]
        changes += [f"step {n!r} was removed" for n in removed]
    kept_old = [n for n in old_names if n in new_names]
    kept_new = [n for n in new_names if n in old_names]
    if kept_old != kept_new:
        changes.append(f"steps were reordered: {' -> '.join(kept_old)} is now {' -> '.join(kept_new)}")
    old_effects = {s.name: set(s.side_effects) for s in old}
    for step in new:
        before = old_effects.get(step.name)
        if before is None:
            continue
        for action in sorted(set(step.side_effects) - before):
            changes.append(f"step {step.name!r} now performs side effect {action!r}")
        for action in sorted(before - set(step.side_effects)):
            changes.append(f"step {step.name!r} no longer performs side effect {action!r}")
    return changes + _route_changes(old, new)


def _route_changes(old: Sequence[StepShape], new: Sequence[StepShape]) -> list[str]:
    """Routes a kept step gained or lost; a step that starts or stops declaring routes says so."""
    old_routes = {s.name: s.routes for s in old}
    changes: list[str] = []
    for step in new:
        before = old_routes.get(step.name)
        if before is None or set(before) == set(step.routes):
            continue
        if not before:
            changes.append(f"step {step.name!r} now declares its routes: {', '.join(step.routes)}")
        elif not step.routes:
            changes.append(f"step {step.name!r} no longer declares routes (it had {', '.join(before)})")
        else:
            changes += [f"step {step.name!r} may now route to {r!r}" for r in step.routes if r not in before]
            changes += [f"step {step.name!r} no longer routes to {r!r}" for r in before if r not in step.routes]
    return changes
