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


# Drawing the graph: a layered layout, one step per row in the order declared, the end below the last.
# A route to the row below is a straight arrow down; a route that skips rows or goes back is drawn in a
# lane on the right, each lane holding routes whose rows do not overlap; a route to itself is a loop on
# the node's left side, clear of the lanes. Coordinates are in the units of an SVG viewBox (the console scales it to fit).

SELF_LOOP = 14  # how far a loop to itself reaches left of its node
NODE_X = SELF_LOOP + 6
NODE_WIDTH = 232
NODE_HEIGHT = 40
ROW_GAP = 28  # between one node's bottom and the next one's top: room for an arrow
LANE_GAP = 12


@dataclass(frozen=True)
class Node:
    """A box of the drawing: a step (`name`), or the end of the run (`name` None)."""

    name: str | None
    row: int
    x: int
    y: int
    width: int
    height: int

    @property
    def middle(self) -> int:
        return self.y + self.height // 2


@dataclass(frozen=True)
class DrawnEdge:
    """An edge of the drawing: the polyline from its source to its target (the arrow at the last point)."""

    edge: Edge
    points: tuple[tuple[int, int], ...]
    shape: str  # "down" (to the next row), "lane" (back or skipping rows), "self" (a loop to itself)

    @property
    def back(self) -> bool:
        """A loop back: to itself or to an earlier step."""
        return self.shape == "self" or self.points[-1][1] < self.points[0][1]


@dataclass(frozen=True)
class Layout:
    width: int
    height: int
    nodes: tuple[Node, ...]
    edges: tuple[DrawnEdge, ...]


def layout(steps: Sequence[str], edges: Sequence[Edge]) -> Layout:
    """Place `steps` top to bottom in the order given, the end last, and route `edges` between them."""
    rows: dict[str | None, int] = {name: row for row, name in enumerate(steps)}
    rows[None] = len(steps)
    nodes = tuple(Node(name, row, NODE_X, 8 + row * (NODE_HEIGHT + ROW_GAP), NODE_WIDTH, NODE_HEIGHT)
                  for name, row in rows.items())
    by_name = {node.name: node for node in nodes}
    lanes = _lanes([e for e in edges if _shape(rows, e) == "lane"], rows)
    first_lane = NODE_X + NODE_WIDTH + LANE_GAP
    drawn = tuple(_draw(e, _shape(rows, e), by_name, first_lane + lanes.get(e, 0) * LANE_GAP) for e in edges)
    width = first_lane + max(lanes.values(), default=-1) * LANE_GAP + 8 if lanes else first_lane
    return Layout(width, nodes[-1].y + nodes[-1].height + 8, nodes, drawn)


def _shape(rows: dict[str | None, int], edge: Edge) -> str:
    source, target = rows[edge.source], rows[edge.target]
    return "self" if source == target else "down" if target == source + 1 else "lane"


def _lanes(edges: Sequence[Edge], rows: dict[str | None, int]) -> dict[Edge, int]:
    """A lane for each edge, shortest spans nearest the nodes; edges whose rows do not overlap share one."""
    def span(edge: Edge) -> tuple[int, int]:
        a, b = rows[edge.source], rows[edge.target]
        return min(a, b), max(a, b)

    taken: list[list[tuple[int, int]]] = []
    lanes: dict[Edge, int] = {}
    for edge in sorted(edges, key=lambda e: (span(e)[1] - span(e)[0], span(e))):
        low, high = span(edge)
        lane = next((i for i, used in enumerate(taken) if all(high < a or low > b for a, b in used)), len(taken))
        if lane == len(taken):
            taken.append([])
        taken[lane].append((low, high))
        lanes[edge] = lane
    return lanes


def _draw(edge: Edge, shape: str, nodes: dict[str | None, Node], lane_x: int) -> DrawnEdge:
    source, target = nodes[edge.source], nodes[edge.target]
    right = source.x + source.width
    if shape == "down":
        x = source.x + source.width // 2
        return DrawnEdge(edge, ((x, source.y + source.height), (x, target.y)), shape)
    if shape == "self":
        left, top, bottom = source.x, source.middle - 8, source.middle + 8
        return DrawnEdge(edge, ((left, top), (left - SELF_LOOP, top), (left - SELF_LOOP, bottom), (left, bottom)),
                         shape)
    # Leave below the middle of the source and arrive above the middle of the target, so that an edge
    # leaving a node and one arriving at it stay apart.
    start, end = source.middle + 6, target.middle - 6
    return DrawnEdge(edge, ((right, start), (lane_x, start), (lane_x, end), (right, end)), shape)
