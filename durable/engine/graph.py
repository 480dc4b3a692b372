"""The graph of a workflow's steps: the routes each step declares, the route a step takes, the graph as data.

A step that declares no routes takes the implicit route: the next declared step, or the end after the last
one (a pipeline, as every workflow was before routes). A step that declares routes chooses one of them by
returning `Route(to, state)` (`wf.goto`); any step may end the run (`Route(None, state)`, `wf.finish`).
Loops are routes back. The graph is part of the replay contract (durable/engine/fingerprint.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable.engine.errors import RouteNotChosen, UndeclaredRoute
from durable.engine.fingerprint import StepShape


@dataclass(frozen=True)
class Route:
    """What a step returns to choose where the run goes: `to` a step's name, or None to finish.

    `state` None keeps the state the step mutated in place.
    """

    to: str | None
    state: Any = None


@dataclass(frozen=True)
class Edge:
    """A route of the graph: `target` None is the end of the run; `implicit`: the step declares no routes."""

    source: str
    target: str | None
    implicit: bool


@dataclass(frozen=True)
class _Exits:
    routes: tuple[str, ...]  # what the step declares (empty: the implicit route)
    allowed: frozenset[str | None]  # where it may go: its routes, or its implicit next; None (finish) always
    plain: str | None  # where a plain state (no Route) goes
    plain_allowed: bool
    implicit: str | None  # the next declared step, None after the last


class Graph:
    """A workflow's steps and routes, checked once: every route names a step of the workflow."""

    def __init__(self, steps: Sequence[StepShape]) -> None:
        self.steps = tuple(steps)
        names = [s.name for s in self.steps]
        self._exits: dict[str, _Exits] = {}
        for position, step in enumerate(self.steps):
            implicit = names[position + 1] if position + 1 < len(names) else None
            self._exits[step.name] = _exits(step, implicit)
        _validate(self.steps)

    def routes(self, step: str) -> tuple[str, ...]:
        return self._exits[step].routes

    def implicit_next(self, step: str) -> str | None:
        """Where the step goes when it declares no routes: the next declared step, None after the last."""
        return self._exits[step].implicit

    def choose(self, step: str, returned: Any) -> tuple[str | None, Any]:
        """The step's next step (None: the run ends) and its new state (None: the state it mutated).

        Raises UndeclaredRoute for a route the step did not declare, RouteNotChosen for a plain state
        returned by a step that declared several routes: both non-retryable (the code would choose again).
        """
        exits = self._exits[step]
        if isinstance(returned, Route):
            if returned.to not in exits.allowed:
                raise UndeclaredRoute(step, returned.to, exits.routes or _implicit(exits.plain))
            return returned.to, returned.state
        if not exits.plain_allowed:
            raise RouteNotChosen(step, exits.routes)
        return exits.plain, returned

    def is_chosen(self, step: str, next_step: str | None) -> bool:
        """Was going from `step` to `next_step` a route the step chose, not the implicit one?"""
        exits = self._exits.get(step)
        return exits is not None and (bool(exits.routes) or next_step != exits.plain)

    def edges(self) -> list[Edge]:
        """Every route of the graph, declared or implicit, in the order the steps are declared."""
        found: list[Edge] = []
        for step in self.steps:
            exits = self._exits[step.name]
            if exits.routes:
                found += [Edge(step.name, target, False) for target in exits.routes]
            else:
                found.append(Edge(step.name, exits.plain, True))
        return found


def _exits(step: StepShape, implicit: str | None) -> _Exits:
    if not step.routes:
        return _Exits((), frozenset({implicit, None}), implicit, True, implicit)
    only = step.routes[0] if len(step.routes) == 1 else None
    return _Exits(step.routes, frozenset({*step.routes, None}), only, len(step.routes) == 1, implicit)


def _implicit(target: str | None) -> tuple[str, ...]:
    return (target,) if target is not None else ()


def _validate(steps: Sequence[StepShape]) -> None:
    """Refuse a graph whose routes name no step of the workflow (ValueError, at registration)."""
    names = {s.name for s in steps}
    for step in steps:
        unknown = [target for target in step.routes if target not in names]
        if unknown:
            raise ValueError(f"step {step.name!r} routes to {', '.join(map(repr, unknown))}, which "
                             f"{'is not a step' if len(unknown) == 1 else 'are not steps'} of this workflow "
                             f"(its steps: {', '.join(s.name for s in steps)})")
        if len(set(step.routes)) != len(step.routes):
            raise ValueError(f"step {step.name!r} declares a route twice: {', '.join(step.routes)}")
