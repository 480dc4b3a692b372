"""The graph of steps (durable/engine/graph.py): declared routes, the route a step takes, the graph as data."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.errors import RouteNotChosen, UndeclaredRoute, classify
from durable.engine.fingerprint import StepShape as S
from durable.engine.graph import Edge, Graph, Route

AGENT = Graph([S("plan", routes=("act", "answer")), S("act", routes=("plan",)), S("answer")])
PIPELINE = Graph([S("a"), S("b"), S("c")])


def test_a_step_without_routes_goes_to_the_next_declared_step_and_the_last_ends_the_run():
    assert PIPELINE.choose("a", "state") == ("b", "state")
    assert PIPELINE.choose("b", None) == ("c", None)
    assert PIPELINE.choose("c", "state") == (None, "state")


def test_a_step_may_go_to_its_implicit_next_step_by_name_and_finish_from_anywhere():
    assert PIPELINE.choose("a", Route("b", "s")) == ("b", "s")
    assert PIPELINE.choose("a", Route(None, "s")) == (None, "s")
    assert AGENT.choose("act", Route(None)) == (None, None)


def test_a_step_chooses_among_its_declared_routes_loops_included():
    assert AGENT.choose("plan", Route("act", "s")) == ("act", "s")
    assert AGENT.choose("plan", Route("answer")) == ("answer", None)
    assert AGENT.choose("act", Route("plan", "s")) == ("plan", "s")
    loop = Graph([S("think", routes=("think", "done")), S("done")])
    assert loop.choose("think", Route("think")) == ("think", None)


def test_a_step_with_one_declared_route_may_return_a_plain_state():
    assert AGENT.choose("act", "state") == ("plan", "state")


def test_an_undeclared_route_is_non_retryable_and_names_the_step_the_route_and_the_declared_ones():
    with pytest.raises(UndeclaredRoute) as caught:
        AGENT.choose("plan", Route("plan"))
    message = str(caught.value)
    assert "'plan'" in message and "'act', 'answer'" in message
    verdict = classify(caught.value)
    assert (verdict.retryable, verdict.kind) == (False, "undeclared_route")


def test_a_step_without_routes_may_not_skip_ahead():
    with pytest.raises(UndeclaredRoute, match=r"step 'a' chose the route 'c'.*it declares 'b'"):
        PIPELINE.choose("a", Route("c"))
    with pytest.raises(UndeclaredRoute, match="declares no route"):
        PIPELINE.choose("c", Route("a"))


def test_a_plain_state_from_a_step_with_several_routes_is_refused_naming_them():
    with pytest.raises(RouteNotChosen, match=r"step 'plan' declares the routes 'act', 'answer'") as caught:
        AGENT.choose("plan", "state")
    assert classify(caught.value).retryable is False


def test_routes_naming_unknown_steps_or_declared_twice_are_refused():
    with pytest.raises(ValueError, match=r"step 'plan' routes to 'tool', which is not a step"):
        Graph([S("plan", routes=("tool", "answer")), S("answer")])
    with pytest.raises(ValueError, match="declares a route twice"):
        Graph([S("plan", routes=("plan", "plan"))])


def test_the_graph_as_data_has_declared_and_implicit_edges_and_the_end():
    assert AGENT.edges() == [Edge("plan", "act", False), Edge("plan", "answer", False), Edge("act", "plan", False),
                             Edge("answer", None, True)]
    assert PIPELINE.edges() == [Edge("a", "b", True), Edge("b", "c", True), Edge("c", None, True)]


def test_a_route_is_chosen_when_the_step_declares_routes_or_leaves_its_implicit_path():
    assert AGENT.is_chosen("plan", "act") and AGENT.is_chosen("act", "plan")
    assert not PIPELINE.is_chosen("a", "b") and not PIPELINE.is_chosen("c", None)
    assert PIPELINE.is_chosen("a", None)  # finished early
    assert not PIPELINE.is_chosen("migration v1->v2", "b")  # not a step: a migration's checkpoint


names = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def graphs(draw):
    steps = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    return [S(name, routes=tuple(draw(st.lists(st.sampled_from(steps), max_size=3, unique=True)))) for name in steps]


@given(graphs(), st.data())
def test_every_choice_lands_on_a_declared_route_or_the_end_or_is_refused(shapes, data):
    graph = Graph(shapes)
    step = data.draw(st.sampled_from(shapes))
    target = data.draw(st.one_of(st.none(), names))
    allowed = {e.target for e in graph.edges() if e.source == step.name} | {None}
    try:
        chosen, _ = graph.choose(step.name, Route(target, "s"))
    except UndeclaredRoute as refused:
        assert target not in allowed and refused.step == step.name and refused.route == target
    else:
        assert chosen == target and chosen in allowed


@given(graphs())
def test_a_plain_state_goes_where_the_implicit_or_only_route_goes(shapes):
    graph = Graph(shapes)
    for step in shapes:
        if len(step.routes) > 1:
            with pytest.raises(RouteNotChosen):
                graph.choose(step.name, "s")
        else:
            expected = step.routes[0] if step.routes else graph.implicit_next(step.name)
            assert graph.choose(step.name, "s") == (expected, "s")


# The layout the console draws (durable.engine.graph.layout): a step per row, loops and skips on the side.

from durable.engine.graph import layout  # noqa: E402


def drawn(graph):
    return layout([s.name for s in graph.steps], graph.edges())


def test_the_layout_puts_the_steps_top_to_bottom_in_declared_order_and_the_end_last():
    drawing = drawn(AGENT)
    assert [node.name for node in drawing.nodes] == ["plan", "act", "answer", None]
    tops = [node.y for node in drawing.nodes]
    assert tops == sorted(tops) and len(set(tops)) == 4
    assert all(node.x + node.width <= drawing.width for node in drawing.nodes)
    assert drawing.nodes[-1].y + drawing.nodes[-1].height <= drawing.height


def test_a_route_to_the_next_row_goes_straight_down_and_a_loop_back_goes_round_the_side():
    shapes = {(e.edge.source, e.edge.target): e for e in drawn(AGENT).edges}
    down = shapes[("plan", "act")]
    assert down.shape == "down" and down.points[0][0] == down.points[-1][0] and not down.back
    back = shapes[("act", "plan")]
    assert back.shape == "lane" and back.back
    right = max(node.x + node.width for node in drawn(AGENT).nodes)
    assert all(x >= right for x, _ in back.points)  # never across a node
    assert shapes[("plan", "answer")].shape == "lane"  # skips `act`: drawn on the side too
    assert shapes[("answer", None)].shape == "down" and shapes[("answer", None)].edge.implicit


def test_a_step_routing_to_itself_is_a_loop_on_its_own_node():
    loop = Graph([S("think", routes=("think", "done")), S("done")])
    think = next(e for e in drawn(loop).edges if e.edge.target == "think")
    node = drawn(loop).nodes[0]
    assert think.shape == "self" and think.back
    assert all(node.y <= y <= node.y + node.height for _, y in think.points)


def test_routes_whose_rows_overlap_take_lanes_of_their_own_and_the_drawing_widens_for_them():
    graph = Graph([S("a", routes=("b", "d")), S("b", routes=("c", "a")), S("c", routes=("d", "a")), S("d")])
    drawing = drawn(graph)
    lanes = {(e.edge.source, e.edge.target): e.points[1][0] for e in drawing.edges if e.shape == "lane"}
    assert len(set(lanes.values())) == len(lanes) == 3  # a->d, b->a and c->a all overlap on row a..b
    assert max(lanes.values()) < drawing.width
    assert drawing.width > drawn(PIPELINE).width


def test_routes_whose_rows_do_not_overlap_share_a_lane():
    graph = Graph([S("a"), S("b", routes=("a", "c")), S("c"), S("d", routes=("c", "e")), S("e")])
    lanes = [e.points[1][0] for e in drawn(graph).edges if e.shape == "lane"]
    assert len(lanes) == 2 and len(set(lanes)) == 1  # b->a and d->c


@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True), st.data())
def test_every_edge_starts_at_its_source_and_ends_at_its_target(names, data):
    steps = [S(n, routes=tuple(data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3)))) for n in names]
    graph = Graph(steps)
    drawing = drawn(graph)
    boxes = {node.name: node for node in drawing.nodes}
    for edge in drawing.edges:
        (x0, y0), (x1, y1) = edge.points[0], edge.points[-1]
        for (x, y), node in ((x0, y0), boxes[edge.edge.source]), ((x1, y1), boxes[edge.edge.target]):
            assert node.x <= x <= node.x + node.width and node.y <= y <= node.y + node.height
        assert all(0 <= x <= drawing.width and 0 <= y <= drawing.height for x, y in edge.points)
