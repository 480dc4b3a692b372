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
