"""A run's graph as its page draws it: the steps of the topology the run is pinned to, their routes, side
effects and approvals, how many times each step was visited and where the run is now.

Drawn from the run's recorded topology, never from the code a worker has now: a run on an older version
shows its own graph. The geometry is durable/engine/graph.py's `layout`; this module adds what the run did.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Count

from durable.engine.graph import DrawnEdge, Edge, Graph, Node, layout
from durable.engine.states import TERMINAL, RunStatus
from durable.engine.topology import shapes_from_json
from durable.models import JournalEntry, Run

END = "end"
# What fits in a node (durable/static/durable/console.css sets the sizes): its width less padding, in
# the units of the drawing; the average advance of a character of a step's name (14 px, bold), of the
# visits beside it (12 px) and of the note below (11 px).
ROOM, NAME_CHAR, VISITS_CHAR, NOTE_CHAR = 200, 8.6, 6.6, 6.0


@dataclass(frozen=True)
class StepDrawing:
    node: Node
    name: str  # the step's name, or "end"
    visits: int  # visits of the step it finished (a checkpoint each); for the end, the times it was reached
    side_effects: tuple[str, ...]
    asked_approval: bool  # the run asked a human for an approval in this step
    goes_to: str  # where the step may go, in words
    current: bool  # where the run is now
    under_way: bool = False  # the run is at this step and not ended: its visit `name #visits+1` is under way or due

    @property
    def is_end(self) -> bool:
        return self.node.name is None

    @property
    def label(self) -> str:
        """The name, cut to leave room for the visits beside it (the node's title has it whole)."""
        return _fit(self.name, int((ROOM - 8 - VISITS_CHAR * len(self.visits_label)) / NAME_CHAR))

    @property
    def visits_label(self) -> str:
        if self.is_end:
            return "reached" if self.visits else ""
        if self.under_way:
            return f"#{self.visits + 1} now"
        return f"{self.visits} visit{'' if self.visits == 1 else 's'}" if self.visits else "not visited"

    @property
    def visits_said(self) -> str:
        """The visits in words, for the node's title and the table."""
        done = f"{self.visits} visit{'' if self.visits == 1 else 's'} finished"
        return done + (f", {self.name} #{self.visits + 1} under way" if self.under_way else "")

    @property
    def note(self) -> str:
        """The second line: its side effects and whether it asked for an approval."""
        parts = [f"⚡ {', '.join(self.side_effects)}"] if self.side_effects else []
        parts += ["human approval"] if self.asked_approval else []
        return _fit(" · ".join(parts), int(ROOM / NOTE_CHAR))

    @property
    def first_line_y(self) -> int:
        """The baseline of the name and visits: high in the node when a note goes below, else in its middle."""
        return self.node.y + (17 if self.note else 25)

    @property
    def note_y(self) -> int:
        return self.node.y + 33

    @property
    def text_x(self) -> int:
        return self.node.x + 10

    @property
    def end_x(self) -> int:
        return self.node.x + self.node.width - 10


@dataclass(frozen=True)
class EdgeDrawing:
    drawn: DrawnEdge
    taken: int  # how many times the run took this route

    @property
    def points(self) -> str:
        return " ".join(f"{x},{y}" for x, y in self.drawn.points)

    @property
    def title(self) -> str:
        edge = self.drawn.edge
        how = "the next declared step" if edge.implicit else "a declared route"
        if edge.target is None:
            how = "the end after the last step" if edge.implicit else "finished from this step"
        taken = f", taken {self.taken} time{'' if self.taken == 1 else 's'}" if self.taken else ", not taken"
        return f"{edge.source} → {edge.target or END} ({how}{taken})"

    @property
    def css(self) -> str:
        classes = ["graph-edge", f"graph-edge-{self.drawn.shape}"]
        classes += ["graph-edge-implicit"] if self.drawn.edge.implicit else []
        classes += ["graph-edge-taken"] if self.taken else []
        return " ".join(classes)


@dataclass(frozen=True)
class RunGraph:
    width: int
    height: int
    steps: tuple[StepDrawing, ...]
    edges: tuple[EdgeDrawing, ...]

    @property
    def description(self) -> str:
        """The picture in one paragraph, for a screen reader (the table below it has the rest)."""
        now = next((s.name for s in self.steps if s.current), "")
        visited = ", ".join(f"{s.name} {s.visits}" for s in self.steps if s.visits and not s.is_end)
        loops = ", ".join(e.title.partition(" (")[0] for e in self.edges if e.drawn.back)
        count = len(self.steps) - 1
        return (f"{count} step{'' if count == 1 else 's'} top to bottom, the end last"
                + (f"; routes back: {loops}" if loops else "")
                + (f"; visits finished: {visited}" if visited else "; no visit finished yet")
                + (f"; the run is now at {now}." if now else "."))


def run_graph(run: Run) -> RunGraph | None:
    """The run's graph with what the run did on it; None when its recorded topology cannot be read."""
    try:
        shapes = {shape.name: shape for shape in shapes_from_json(run.topology or [])}
        graph = Graph(list(shapes.values()))
    except (ValueError, KeyError, TypeError):
        return None
    if not shapes:
        return None
    visits, taken = _walked(run)
    edges = list(graph.edges())
    # A step may end the run from anywhere (wf.finish) without declaring it: draw the ends it took. (A
    # migration's checkpoint names no step of this graph.)
    edges += [Edge(source, None, False) for source, target in taken
              if target is None and source in shapes and Edge(source, None, True) not in edges]
    drawing = layout(list(shapes), edges)
    asked = set(run.journal.filter(kind=JournalEntry.Kind.APPROVAL).values_list("step", flat=True).distinct())
    here = None if run.status == RunStatus.SUCCEEDED else run.current_step or None

    def drawn(node: Node) -> StepDrawing:
        if node.name is None:
            return StepDrawing(node, END, visits[None], (), False, "", run.status == RunStatus.SUCCEEDED)
        return StepDrawing(node, node.name, visits[node.name], shapes[node.name].side_effects, node.name in asked,
                           _goes_to(graph, node.name), node.name == here,
                           under_way=node.name == here and run.status not in TERMINAL)

    return RunGraph(drawing.width, drawing.height, tuple(drawn(node) for node in drawing.nodes),
                    tuple(EdgeDrawing(e, taken[(e.edge.source, e.edge.target)]) for e in drawing.edges))


def _walked(run: Run) -> tuple[Counter[str | None], Counter[tuple[str, str | None]]]:
    """Visits each step finished and routes taken (step, next step), from the run's checkpoints in one query.

    A checkpoint is written when a visit finishes, naming the step it finished and where it goes next; the
    end's count is how many checkpoints went to the end."""
    visits: Counter[str | None] = Counter()
    taken: Counter[tuple[str, str | None]] = Counter()
    for row in run.checkpoints.values("step", "next_step").annotate(n=Count("seq")):
        target = row["next_step"] or None
        if target is None:
            visits[None] += row["n"]
        if row["step"]:  # the checkpoint a run starts with finished no step
            visits[row["step"]] += row["n"]
            taken[(row["step"], target)] += row["n"]
    return visits, taken


def _goes_to(graph: Graph, step: str) -> str:
    routes = graph.routes(step)
    if routes:
        return ", ".join(routes)
    implicit = graph.implicit_next(step)
    return f"{implicit} (the next step)" if implicit else f"{END} (the last step)"


def _fit(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"
