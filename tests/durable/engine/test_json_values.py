"""JSON values the database can store (durable/engine/json_values.py): one rule, refused or repaired."""
from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.json_values import (
    HAS_NUL,
    HAS_SURROGATE,
    MAX_JSON_DEPTH,
    NOT_FINITE,
    TOO_DEEP,
    UnstorableJSON,
    check_storable,
    storable_copy,
    storable_text,
)

# Text as an LLM or a downstream may hand it over: any character, lone surrogates and NUL among them, often.
hostile_text = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]), st.just("\x00")), max_size=8)
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_text,
    lambda children: (st.lists(children, max_size=4) | st.tuples(children, children)
                      | st.dictionaries(hostile_text, children, max_size=4)),
    max_leaves=20,
)


def storable_by_definition(value: Any, depth: int = 1) -> bool:
    """The rule read plainly: text UTF-8 can encode and Postgres can hold, finite numbers, bounded nesting."""
    if isinstance(value, str):
        return "\x00" not in value and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict | list | tuple):
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        return depth <= MAX_JSON_DEPTH and all(
            (not isinstance(key, str) or storable_by_definition(key)) and storable_by_definition(child, depth + 1)
            for key, child in pairs)
    return True


def refusal(value: Any) -> UnstorableJSON | None:
    try:
        check_storable(value)
    except UnstorableJSON as exc:
        return exc
    return None


@given(json_like)
def test_check_storable_refuses_exactly_what_the_rule_refuses(value):
    assert (refusal(value) is None) == storable_by_definition(value)


@given(json_like)
def test_a_storable_copy_always_passes_and_is_the_value_itself_when_it_already_passes(value):
    copy = storable_copy(value)
    check_storable(copy)
    json.dumps(copy, allow_nan=False, ensure_ascii=False).encode("utf-8")  # what a jsonb column is sent
    if storable_by_definition(value):
        assert copy is value
    else:
        assert storable_copy(copy) is copy


@pytest.mark.parametrize("value, problem, path", [
    ({"plan": [{"summary": "ok"}, {"summary": "a\x00b"}]}, HAS_NUL, ("plan", 1, "summary")),
    ({"a\ud800": 1}, HAS_SURROGATE, ("a\ud800",)),
    ({"score": float("nan")}, NOT_FINITE, ("score",)),
    ([1, (2, -math.inf)], NOT_FINITE, (1, 1)),  # a tuple is written as a list, so it is checked as one
    ("\x00", HAS_NUL, ()),
])
def test_a_refusal_says_what_is_wrong_and_where(value, problem, path):
    exc = refusal(value)
    assert (exc.problem, exc.path, str(exc)) == (problem, path, problem)


def test_a_refusal_names_the_field_in_words():
    assert refusal({"plan": [{"summary": "\x00"}]}).detail == "field plan[0].summary " + HAS_NUL
    assert refusal({"odd key": {"\x00": 1}}).detail == "field ['odd key']['\\x00'] " + HAS_NUL
    assert refusal(float("inf")).detail == "it " + NOT_FINITE


def test_nesting_past_the_limit_is_refused_and_cut_in_a_copy():
    deep: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    exc = refusal(deep)
    assert exc.problem == TOO_DEEP and len(exc.path) == MAX_JSON_DEPTH
    copy = storable_copy(deep)
    check_storable(copy)
    for _ in range(MAX_JSON_DEPTH - 1):
        copy = copy[0]
    assert copy == [None]


def test_text_is_repaired_character_by_character():
    assert storable_text("a\x00b\ud800c\udfff") == "a\ufffdb\ufffdc\ufffd"
    assert storable_text("\ud83d\ude00") == "\U0001f600"  # a UTF-16 pair is the character it encodes
    clean = "déjà vu"
    assert storable_text(clean) is clean


def test_numbers_json_cannot_write_become_null_and_keys_are_repaired():
    assert storable_copy({"fee": float("nan"), "cap": float("-inf"), "k\x00": ("v\ud800",), "n": 1}) == {
        "fee": None, "cap": None, "k\ufffd": ["v\ufffd"], "n": 1}
