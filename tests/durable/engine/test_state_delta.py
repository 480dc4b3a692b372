"""A checkpoint's difference: applied to the state before, it gives exactly the state after, type for type."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from durable.engine.state_delta import (
    FULL_FLOOR_BYTES,
    FULL_WHEN_DIFFERENCES_WEIGH,
    Chain,
    TooLarge,
    apply,
    copied,
    diff,
    refuse_too_large,
    replay,
    same,
    weight,
)

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=5)),
                      max_leaves=30)
states = st.dictionaries(st.text(max_size=4), values, max_size=6)


def stored(delta):
    """As the database gives it back: through JSON text."""
    return json.loads(json.dumps(delta))


def test_a_list_that_only_grew_stores_what_was_appended():
    old = {"messages": ["a" * 4000] * 50, "turn": 50}
    new = {"messages": [*old["messages"], "b" * 4000], "turn": 51}
    delta = diff(old, new)
    assert delta == {"keys": {"messages": {"+": ["b" * 4000]}, "turn": {"=": 51}}}
    assert len(json.dumps(delta)) < 4100


def test_an_edit_inside_a_long_list_stores_that_item_only():
    old = {"items": [{"id": i, "text": "x" * 100} for i in range(100)]}
    new = copied(old)
    new["items"][40]["text"] = "edited"
    assert diff(old, new) == {"keys": {"items": {"at": [40, {"keys": {"text": {"=": "edited"}}}]}}}


def test_a_deletion_in_the_middle_is_a_splice():
    old = {"items": list(range(100))}
    new = {"items": [*range(40), *range(41, 100)]}
    assert diff(old, new) == {"keys": {"items": {"splice": [40, 41, []]}}}


def test_values_differ_by_type_not_only_by_equality():
    assert not same(1, 1.0) and not same(1, True) and not same(0, False) and same({"a": [1]}, {"a": [1]})
    assert diff({"n": 1}, {"n": True}) == {"keys": {"n": {"=": True}}}
    assert diff({"n": 1}, {"n": 1.0}) == {"keys": {"n": {"=": 1.0}}}


def test_the_same_state_has_no_difference_and_removed_keys_are_dropped():
    assert diff({"a": 1}, {"a": 1}) is None
    assert apply({"a": 1, "b": 2}, stored(diff({"a": 1, "b": 2}, {"a": 1}))) == {"a": 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(states, min_size=1, max_size=8))
def test_replaying_the_differences_gives_every_state_exactly(sequence):
    """Any sequence of states (appends, edits, deletions, nested values): the first, then each difference, as
    stored, gives each state back, equal as JSON type for type."""
    read = copied(sequence[0])
    for before, after in zip(sequence, sequence[1:], strict=False):
        delta = diff(before, after)
        read = apply(read, stored(delta)) if delta is not None else read
        assert same(read, after), (before, after, delta)


@settings(max_examples=60, deadline=None)
@given(states, st.lists(values, max_size=5), st.data())
def test_appends_and_edits_of_a_conversation_cost_what_changed(state, appended, data):
    messages = state.get("messages")
    old = {**state, "messages": messages if isinstance(messages, list) else []}
    new = copied(old)
    new["messages"].extend(appended)
    if new["messages"] and data.draw(st.booleans()):
        new["messages"][-1] = data.draw(values)
    delta = diff(old, new)
    assert replay(copied(old), [stored(delta)] if delta else []) == stored(new)


def test_a_full_checkpoint_is_due_by_count_or_by_the_weight_of_the_differences():
    chain = Chain(seq=0, state={}, base=0, full_bytes=10)
    assert not chain.stores_differences()  # a small state is written whole
    assert not chain.wants_full(100, every=3)
    chain.wrote_delta(1, {}, 100)
    assert chain.wants_full(100, every=2)  # the second difference after a full one, with every=2
    assert chain.wants_full(FULL_WHEN_DIFFERENCES_WEIGH * FULL_FLOOR_BYTES, every=1000)  # they would outweigh it
    chain.wrote_full(2, {}, 5000)
    assert (chain.base, chain.since_count, chain.since_bytes) == (2, 0, 0) and chain.stores_differences()
    weight = FULL_WHEN_DIFFERENCES_WEIGH * 5000
    assert not chain.wants_full(weight, every=1000) and chain.wants_full(weight + 1, every=1000)


def test_a_value_s_weight_is_about_its_json_text_s_length():
    value = {"messages": ["a" * 4000, "é" * 100], "n": 1, "nested": [{"k": None}, 1.5, True]}
    assert abs(weight(value) - len(json.dumps(value, ensure_ascii=False).encode())) < 60


def test_a_value_over_the_limit_is_refused_naming_it_and_its_size():
    refuse_too_large({"text": "x" * 100}, what="the state after step 'turn'", kind="state_too_large", limit=0)
    try:
        refuse_too_large({"text": "x" * 3_000_000}, what="the state after step 'turn'", kind="state_too_large",
                         limit=1_000_000)
    except TooLarge as exc:
        assert (exc.kind, exc.retryable) == ("state_too_large", False)
        assert str(exc).startswith("the state after step 'turn' weighs about 3.0 MB as JSON, over the limit of 1.0 MB")
    else:
        raise AssertionError("a state of 3 MB passed a limit of 1 MB")
