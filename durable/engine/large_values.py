"""Large values stored once: a JSON value's large parts taken out, addressed by their content's hash, and put back.

A state, a difference or an activity's result over DURABLE_LARGE_VALUE_BYTES (as JSON) is stored with its large
parts apart (durable.store.values keeps them, one row per content hash), so a large value that recurs (in every
full checkpoint after it appeared, in several results) is stored once (docs/state-storage.md).

Which parts: the largest parts over the threshold whose own parts are each under it: a long string, or a list or
an object whose items are each small but weigh more than the threshold together (a tool's result, a document). A
part with a larger part inside stays where it is and only that larger part is taken out, so a conversation whose
turns carry a large value keeps its turns inline and takes out each large value.

The references are kept out of band, beside the value, never inside it, so no user data can be mistaken for one:
a value with parts taken out is stored as ``{"durable:values": [[path, hash], ...], "durable:value": rest}``,
where ``rest`` is the value with each part taken out replaced by null, and ``path`` the keys (strings) and
indexes (integers) that lead to it (``[]``: the whole value). A value that is an object holding the key
``durable:values`` itself is stored in the same envelope with no reference, so reading it never mistakes it:
only the top level is ever looked at.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from durable.engine.state_delta import copied

REFERENCES = "durable:values"
VALUE = "durable:value"

Path = list[str | int]


def canonical(value: Any) -> str:
    """The text a value is addressed by: JSON with sorted keys and no spaces (jsonb forgets key order anyway)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(text: str) -> str:
    """The address of a value's canonical text: its SHA-256, in hex."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def is_envelope(stored: Any) -> bool:
    """Whether a stored value is an envelope (it has parts apart, or is an object that looked like one)."""
    return type(stored) is dict and REFERENCES in stored


@dataclass
class Split:
    """A value as stored: what its row holds, and its parts stored apart (hash -> canonical text)."""

    stored: Any
    apart: dict[str, str] = field(default_factory=dict)


def split(value: Any, threshold: int) -> Split:
    """`value` with its parts over `threshold` bytes (as JSON) taken out; 0: none is. The caller skips this when it
    knows the whole value weighs less than `threshold` (its serialization's length): see `kept_whole`."""
    if threshold <= 0:
        return Split(kept_whole(value))
    references: list[list[Any]] = []
    apart: dict[str, str] = {}
    stored, _ = _take(value, [], threshold, references, apart)
    if not references:
        return Split(kept_whole(value))
    return Split({REFERENCES: references, VALUE: stored}, apart)


def kept_whole(value: Any) -> Any:
    """A value stored with nothing apart: itself, unless it looks like an envelope (then in one, with no
    reference). Costs one look at the top level."""
    return {REFERENCES: [], VALUE: value} if is_envelope(value) else value


def _take(value: Any, path: Path, threshold: int, references: list[list[Any]],
          apart: dict[str, str]) -> tuple[Any, int]:
    """`value` with its large parts taken out, and what `value` weighs as compact JSON (bytes, about: a key or a
    string is measured as its JSON text's UTF-8). A part is taken out when it is over the threshold and none of its
    own parts is."""
    kind = type(value)
    if kind is dict:
        kept: dict[str, Any] = {}
        size, larger_inside = 1 + max(len(value), 1), False
        for key, item in value.items():
            kept[key], weight = _take(item, [*path, key], threshold, references, apart)
            size += _text_bytes(json.dumps(key, ensure_ascii=False)) + 1 + weight
            larger_inside = larger_inside or weight > threshold
        result: Any = kept
    elif kind is list:
        items: list[Any] = []
        size, larger_inside = 1 + max(len(value), 1), False
        for index, item in enumerate(value):
            taken, weight = _take(item, [*path, index], threshold, references, apart)
            items.append(taken)
            size += weight
            larger_inside = larger_inside or weight > threshold
        result = items
    else:
        size, larger_inside, result = _text_bytes(json.dumps(value, ensure_ascii=False)), False, value
    if size > threshold and not larger_inside:
        text = canonical(value)
        address = content_hash(text)
        apart[address] = text
        references.append([path, address])
        return None, size  # the envelope names it: the place holds nothing more
    return result, size


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def references(stored: Any) -> list[str]:
    """The hashes a stored value refers to (none unless it is an envelope)."""
    if not is_envelope(stored):
        return []
    return [address for _, address in stored[REFERENCES]]


class MissingValue(LookupError):
    """A stored value refers to a part that is not stored (deleted by hand: durable_prune never deletes one a row
    refers to)."""


def joined(stored: Any, found: Mapping[str, Any]) -> Any:
    """The value a stored one stands for: its parts put back from `found` (hash -> value, as parsed), each placed
    as a copy of its own (one part may recur; a reader may change the value in place). MissingValue when a part is
    not in `found`. Changes `stored` in place: give it a value read for this purpose."""
    if not is_envelope(stored):
        return stored
    value = stored[VALUE]
    for path, address in stored[REFERENCES]:
        if address not in found:
            raise MissingValue(f"a stored value refers to the large value {address}, which is not stored")
        part = copied(found[address])
        if not path:
            return part
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = part
    return value
