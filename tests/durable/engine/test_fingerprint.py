"""Topology fingerprints (durable/engine/fingerprint.py): what a run is pinned to, from its steps' shape."""
import re

from hypothesis import given
from hypothesis import strategies as st

from durable.engine.fingerprint import StepShape, topology_fingerprint

STEPS = [StepShape("plan"), StepShape("refund", ("refund",)), StepShape("notify", ("email", "sms"))]
names = st.text(min_size=1, max_size=8)


def test_a_fingerprint_is_32_hex_characters_and_the_same_for_the_same_shape():
    assert re.fullmatch(r"[0-9a-f]{32}", topology_fingerprint(STEPS))
    assert topology_fingerprint(STEPS) == topology_fingerprint([StepShape(s.name, s.side_effects) for s in STEPS])


def test_the_order_of_steps_is_part_of_the_shape():
    assert topology_fingerprint(STEPS) != topology_fingerprint([STEPS[1], STEPS[0], STEPS[2]])


def test_a_renamed_step_or_a_new_side_effect_changes_the_fingerprint():
    renamed = [StepShape("think"), *STEPS[1:]]
    more = [*STEPS[:2], StepShape("notify", ("email", "sms", "push"))]
    assert len({topology_fingerprint(STEPS), topology_fingerprint(renamed), topology_fingerprint(more)}) == 3


def test_the_order_a_step_lists_its_side_effects_in_is_not():
    assert topology_fingerprint(STEPS) == topology_fingerprint([*STEPS[:2], StepShape("notify", ("sms", "email"))])


@given(st.lists(st.tuples(names, st.lists(names, max_size=3)), max_size=6))
def test_a_list_and_a_tuple_of_the_same_shapes_fingerprint_alike(shapes):
    steps = [StepShape(name, tuple(effects)) for name, effects in shapes]
    assert topology_fingerprint(steps) == topology_fingerprint(tuple(steps))


def test_routes_are_part_of_the_shape_only_when_a_step_declares_some():
    plain = [StepShape("plan"), StepShape("act")]
    looping = [StepShape("plan", routes=("act",)), StepShape("act", routes=("plan", "act"))]
    assert topology_fingerprint(plain) == topology_fingerprint([StepShape("plan", (), ()), StepShape("act", (), ())])
    assert topology_fingerprint(looping) != topology_fingerprint(plain)
    # The order a step lists its routes in is not part of the shape; what it may reach is.
    assert topology_fingerprint(looping) == topology_fingerprint([looping[0], StepShape("act", routes=("act", "plan"))])
    assert topology_fingerprint(looping) != topology_fingerprint([looping[0], StepShape("act", routes=("plan",))])
