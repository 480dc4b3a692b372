"""The search box's text rule (durable/engine/search.py): one fold for what is indexed and what is typed."""
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.search import LINE, field_text, fold, searchable_fields


def test_any_case_typed_matches_any_case_stored():
    assert fold("Ord-1001") == fold("ORD-1001") == fold("ord-1001") == "ord-1001"


@given(st.text())
def test_folding_twice_is_folding_once_so_stored_text_can_be_searched_again(text):
    assert fold(fold(text)) == fold(text)


def test_only_fields_named_and_holding_a_number_or_a_string_are_searchable():
    data = {"order_id": "ORD-1", "amount": 12.5, "items": 3, "note": "", "tags": ["a"], "meta": {"a": 1},
            "gift": True, "customer": "Ann"}
    assert searchable_fields(data, ["order_id", "amount", "items", "note", "tags", "meta", "gift", "missing"]) == {
        "order_id": "ORD-1", "amount": "12.5", "items": "3"}


def test_the_indexed_text_is_folded_one_field_a_line_so_no_match_spans_two_fields():
    text = field_text({"order_id": "ORD-1", "note": "Two\nLines"})
    assert text == "ord-1\ntwo lines" and text.split(LINE) == ["ord-1", "two lines"]
