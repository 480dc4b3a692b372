from durable.engine.fingerprint import StepShape as S
from durable.engine.topology import describe_changes, shapes_from_json, shapes_to_json

V1 = [S("planner"), S("lookup"), S("payment", ("refund",)), S("notify", ("notify",))]


def test_same_topology_has_no_changes():
    assert describe_changes(V1, list(V1)) == []


def test_an_inserted_step_is_named_with_its_position():
    v2 = [S("planner"), S("lookup"), S("risk_check"), S("payment", ("refund",)), S("notify", ("notify",))]
    assert describe_changes(V1, v2) == ["step 'risk_check' was inserted at position 3"]


def test_a_removed_step():
    assert describe_changes(V1, [V1[0], V1[2], V1[3]]) == ["step 'lookup' was removed"]


def test_a_renamed_step_in_the_same_place():
    v2 = [S("plan"), *V1[1:]]
    assert describe_changes(V1, v2) == ["step 'planner' was renamed to 'plan'"]


def test_reordered_steps():
    v2 = [V1[1], V1[0], *V1[2:]]
    assert describe_changes(V1, v2) == ["steps were reordered: planner -> lookup -> payment -> notify "
                                       "is now lookup -> planner -> payment -> notify"]


def test_a_new_side_effect_on_an_existing_step():
    v2 = [*V1[:3], S("notify", ("notify", "sms"))]
    assert describe_changes(V1, v2) == ["step 'notify' now performs side effect 'sms'"]


def test_topology_round_trips_through_json():
    assert shapes_from_json(shapes_to_json(V1)) == V1


def test_routes_are_recorded_only_when_declared_and_read_back():
    shapes = [S("plan", routes=("act", "answer")), S("act", ("refund",), ("plan",)), S("answer")]
    recorded = shapes_to_json(shapes)
    assert recorded[2] == {"step": "answer", "side_effects": []}
    assert recorded[0] == {"step": "plan", "side_effects": [], "routes": ["act", "answer"]}
    assert shapes_from_json(recorded) == shapes


def test_route_changes_are_named():
    v1 = [S("plan", routes=("act", "answer")), S("act"), S("answer")]
    v2 = [S("plan", routes=("act", "check")), S("act", routes=("plan",)), S("check"), S("answer")]
    assert describe_changes(v1, v2) == [
        "step 'check' was inserted at position 3",
        "step 'plan' may now route to 'check'", "step 'plan' no longer routes to 'answer'",
        "step 'act' now declares its routes: plan",
    ]
    assert describe_changes(v2[:1], [S("plan")]) == ["step 'plan' no longer declares routes (it had act, check)"]
