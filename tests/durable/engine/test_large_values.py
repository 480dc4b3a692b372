"""Large values stored once: a value split into what its row holds and its large parts, then joined, is exactly the
value, for any value and threshold, including objects that look like the envelope."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from durable.engine.large_values import (
    REFERENCES,
    VALUE,
    MissingValue,
    canonical,
    content_hash,
    joined,
    kept_whole,
    references,
    split,
)

text = st.text(max_size=12)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**15, 10**15),
                    st.floats(allow_nan=False, allow_infinity=False), text)
# Objects whose keys include the envelope's own, anywhere: user data may hold any object.
keys = st.one_of(text, st.sampled_from([REFERENCES, VALUE]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                       st.dictionaries(keys, inner, max_size=4)), max_leaves=25)
envelope_like = st.fixed_dictionaries({REFERENCES: values, VALUE: values})


def through_json(value):
    """As a row and a stored value come back from the database: through JSON text."""
    return json.loads(json.dumps(value))


def read_back(value, threshold):
    parts = split(value, threshold)
    found = {address: json.loads(text) for address, text in parts.apart.items()}
    return joined(through_json(parts.stored), found), parts


@settings(max_examples=200)
@given(st.one_of(values, envelope_like), st.integers(0, 300))
def test_any_value_reads_back_exactly(value, threshold):
    expected = through_json(value)
    read, parts = read_back(value, threshold)
    assert read == expected and json.dumps(read, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert set(references(parts.stored)) == set(parts.apart)
    for address, stored_text in parts.apart.items():
        assert content_hash(stored_text) == address


@given(values, st.integers(1, 300))
def test_every_part_stored_apart_is_over_the_threshold_and_none_inside_it_is(value, threshold):
    parts = split(value, threshold)
    for stored_text in parts.apart.values():
        assert len(stored_text.encode()) > threshold
        part = json.loads(stored_text)
        inside = part.values() if isinstance(part, dict) else part if isinstance(part, list) else []
        assert all(len(canonical(item).encode()) <= threshold for item in inside)


def test_a_large_value_that_recurs_is_stored_once():
    big = "x" * 1000
    state = {"turns": [{"role": "tool", "content": big}, {"role": "user", "content": "hi"},
                       {"role": "tool", "content": big}], "document": big}
    parts = split(state, 500)
    assert list(parts.apart) == [content_hash(canonical(big))]
    assert len(references(parts.stored)) == 3
    assert len(json.dumps(parts.stored)) < 600
    assert joined(through_json(parts.stored), {content_hash(canonical(big)): big}) == state


def test_the_largest_parts_whose_own_parts_are_small_are_taken_out_not_their_containers():
    result = {"hits": [{"title": f"hit {i}", "text": "y" * 40} for i in range(40)]}  # ~2.6 KB of small items
    conversation = {"messages": [f"turn {i} " + "z" * 50 for i in range(100)], "result": result}
    parts = split(conversation, 1000)
    taken = {tuple(path) for path, _ in parts.stored[REFERENCES]}
    # Each is over 1000 bytes and made of parts under it: each is stored whole; the state around them is not.
    assert taken == {("messages",), ("result", "hits")}


def test_a_long_string_inside_a_turn_is_taken_out_alone():
    turn = {"role": "tool", "name": "search", "content": "w" * 5000}
    parts = split({"+": [turn]}, 1000)  # a checkpoint's difference that appends one turn
    assert parts.stored[REFERENCES] == [[["+", 0, "content"], content_hash(canonical("w" * 5000))]]
    assert parts.stored[VALUE]["+"][0]["role"] == "tool"


def test_the_whole_value_may_be_taken_out():
    value = "v" * 200
    parts = split(value, 100)
    assert parts.stored == {REFERENCES: [[[], content_hash(canonical(value))]], VALUE: None}
    assert joined(through_json(parts.stored), {content_hash(canonical(value)): value}) == value


def test_an_object_that_looks_like_an_envelope_is_kept_in_one_and_reads_back_as_itself():
    user = {REFERENCES: [[["a"], "0" * 64]], VALUE: {"a": "not a reference"}}
    stored = kept_whole(user)
    assert stored == {REFERENCES: [], VALUE: user}
    assert joined(through_json(stored), {}) == user
    assert split(user, 0).stored == stored and split(user, 10**6).stored == stored


def test_a_value_with_nothing_large_is_stored_as_it_is():
    value = {"a": [1, 2, {"b": "c"}], "nested": {REFERENCES: "deep, not at the top: never looked at"}}
    assert split(value, 10**6).stored is value
    assert split(value, 0).stored is value
    assert joined(value, {}) is value


def test_a_part_placed_twice_is_two_values_not_one():
    part = {"k": list(range(50))}
    read, _ = read_back({"a": part, "b": part}, 100)
    read["a"]["k"].append("changed")
    assert read["b"]["k"][-1] == 49


def test_a_missing_part_is_named():
    parts = split("m" * 300, 100)
    try:
        joined(parts.stored, {})
    except MissingValue as exc:
        assert content_hash(canonical("m" * 300)) in str(exc)
    else:
        raise AssertionError("a missing part must not read as a value")
