import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from durable.engine.ids import canonical_json, family_operation_id, operation_id, request_hash

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def test_operation_id_is_first_32_hex_of_sha256_of_run_action_key():
    expected = hashlib.sha256(b"run-1:refund:ORD-1").hexdigest()[:32]
    assert operation_id("run-1", "refund", "ORD-1") == expected


@given(st.text(), st.text(), st.text())
def test_operation_id_is_stable_32_hex(run_id, action, key):
    first = operation_id(run_id, action, key)
    assert first == operation_id(run_id, action, key)
    assert re.fullmatch("[0-9a-f]{32}", first)


@given(st.text(), st.text(), st.text())
def test_a_run_that_is_its_own_root_keeps_its_operation_ids(run_id, action, key):
    assert family_operation_id(run_id, None, action, key) == operation_id(run_id, action, key)


def test_a_fork_names_its_operations_by_the_familys_first_run():
    """A fork, and a fork of it, asking what the root did get the root's id: the downstream's same key."""
    root = operation_id("root-run", "refund", "ORD-1")
    assert family_operation_id("fork-1", "root-run", "refund", "ORD-1") == root
    assert family_operation_id("fork-of-fork", "root-run", "refund", "ORD-1") == root
    assert family_operation_id("fork-1", "root-run", "refund", "ORD-2") != root


@given(st.dictionaries(st.text(), json_values))
def test_request_hash_ignores_key_order(payload):
    reversed_payload = dict(reversed(list(payload.items())))
    assert request_hash(payload) == request_hash(reversed_payload)


def test_request_hash_changes_when_a_value_changes():
    assert request_hash({"amount": "10.00"}) != request_hash({"amount": "10.01"})


def test_canonical_json_has_no_whitespace_and_sorted_keys():
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
