"""What changed between two checkpoints' states: a difference, applied to the older state to give the newer.

A checkpoint that stored the whole state every time made a long conversation cost the square of its length (a
list that grows by one turn a visit is written again at every visit). A checkpoint now stores the difference
from the one before, and a full state (a "full checkpoint") now and then, so reading one takes a full state and
the differences after it (docs/state-storage.md).

A difference is JSON (it is stored in a jsonb column), one of:

- ``{"=": value}``: the value is replaced;
- ``{"+": items}``: a list only grew, by these items at its end (a conversation's new turns);
- ``{"splice": [start, stop, items]}``: a list's items ``start:stop`` are replaced by ``items`` (an insertion, a
  deletion or an edit in the middle of a long list costs what changed);
- ``{"at": [index, difference]}``: one item of a list changed inside;
- ``{"keys": {key: difference}, "drop": [key, ...]}``: an object's keys changed, were added, or were removed.

Values are compared strictly as JSON: ``1``, ``1.0`` and ``true`` differ, so what is read back is what the step
returned, type for type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable.engine.errors import NonRetryableError

Delta = dict[str, Any]

# A full checkpoint is written once the differences since the last one weigh this many times what it weighed
# (never less than FULL_FLOOR_BYTES): reading a state then reads at most a few times its size, and a state that
# only grows stores a full copy at geometrically spaced visits, so storage stays linear in the state's size.
FULL_WHEN_DIFFERENCES_WEIGH = 8
FULL_FLOOR_BYTES = 2048
# A state lighter than this is written whole at every checkpoint: its difference would weigh about as much, and
# skipping the comparison keeps a small state's step as cheap as it was (durable_bench --in-process).
SMALL_STATE_BYTES = 1024


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are equal as JSON: type for type (1, 1.0 and True differ), any key order."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return len(a) == len(b) and all(key in b and same(value, b[key]) for key, value in a.items())
    if kind is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def diff(old: Any, new: Any) -> Delta | None:
    """The difference that turns `old` into `new`, or None when they are the same."""
    if same(old, new):
        return None
    return _changed(old, new)


def _changed(old: Any, new: Any) -> Delta:
    """The difference between two values known to differ."""
    if type(old) is dict and type(new) is dict:
        return _object_changed(old, new)
    if type(old) is list and type(new) is list:
        return _list_changed(old, new)
    return {"=": new}


def _object_changed(old: dict[str, Any], new: dict[str, Any]) -> Delta:
    keys = {key: _changed(old[key], value) if key in old else {"=": value}
            for key, value in new.items() if key not in old or not same(old[key], value)}
    dropped = [key for key in old if key not in new]
    return {**({"keys": keys} if keys else {}), **({"drop": dropped} if dropped else {})}


def _list_changed(old: list[Any], new: list[Any]) -> Delta:
    shorter = min(len(old), len(new))
    start = 0
    while start < shorter and same(old[start], new[start]):
        start += 1
    if start == len(old):
        return {"+": new[start:]}
    end = 0  # items equal at both ends, not overlapping the equal start
    while end < shorter - start and same(old[-1 - end], new[-1 - end]):
        end += 1
    old_stop, new_stop = len(old) - end, len(new) - end
    if old_stop - start == 1 and new_stop - start == 1 and type(old[start]) is type(new[start]) \
            and type(new[start]) in (dict, list):
        return {"at": [start, _changed(old[start], new[start])]}
    if start == 0 and end == 0:
        return {"=": new}
    return {"splice": [start, old_stop, new[start:new_stop]]}


def apply(value: Any, delta: Delta) -> Any:
    """The value `delta` turns `value` into. Changes `value`'s lists and objects in place and may take parts of
    `delta` into the result: give it values read for this purpose (a checkpoint's JSON, just parsed)."""
    if "=" in delta:
        return delta["="]
    if "+" in delta:
        value.extend(delta["+"])
        return value
    if "splice" in delta:
        start, stop, items = delta["splice"]
        value[start:stop] = items
        return value
    if "at" in delta:
        index, inner = delta["at"]
        value[index] = apply(value[index], inner)
        return value
    for key in delta.get("drop", ()):
        del value[key]
    for key, inner in delta.get("keys", {}).items():
        value[key] = apply(value.get(key), inner)
    return value


def replay(full: Any, deltas: list[Delta]) -> Any:
    """A full state with the differences after it applied in order: the newest state (`full` is changed)."""
    for delta in deltas:
        full = apply(full, delta)
    return full


def copied(value: Any) -> Any:
    """A copy of a JSON value whose lists and objects are its own (strings and numbers are immutable: shared)."""
    if type(value) is dict:
        return {key: copied(item) for key, item in value.items()}
    if type(value) is list:
        return [copied(item) for item in value]
    return value


def weight(value: Any) -> int:
    """About what `value` weighs as JSON text, in bytes, without encoding it (a state of 0.8 MB: about 0.03 ms,
    where json.dumps takes 6 ms): its text's characters, 8 bytes a number, 2 a punctuation mark."""
    total = 0
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            total += (len(item) if item.isascii() else len(item.encode("utf-8", "surrogatepass"))) + 2
        elif kind is dict:
            total += 2 + sum(len(key) + 4 for key in item)
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            total += 2 + len(item)
            pending.extend(item)
        else:
            total += 8
    return total


class TooLarge(NonRetryableError):
    """A state or an activity's result weighs more than DURABLE_MAX_VALUE_BYTES: the step fails for good (it would
    choose the same value again) with an error naming the value and its size, not the database's."""

    def __init__(self, what: str, size: int, limit: int, *, kind: str) -> None:
        super().__init__(f"{what} weighs about {size / 1e6:,.1f} MB as JSON, over the limit of {limit / 1e6:,.1f} MB "
                         "(DURABLE_MAX_VALUE_BYTES): keep large data outside the state (a file, an object store) and "
                         "its reference in it", kind=kind)
        self.size, self.limit = size, limit


def refuse_too_large(value: Any, *, what: str, kind: str, limit: int) -> None:
    """Raise TooLarge when `value` weighs more than `limit` bytes as JSON (0: no limit)."""
    if limit:
        size = weight(value)
        if size > limit:
            raise TooLarge(what, size, limit, kind=kind)


@dataclass
class Chain:
    """What a writer knows of a run's newest checkpoint: its state, and the full checkpoint it builds on."""

    seq: int  # the newest checkpoint's seq
    state: Any  # its whole state (the writer's own: nothing else changes it)
    base: int  # the seq of the full checkpoint it builds on (itself when it is full)
    full_bytes: int  # what that full checkpoint's state weighs, as JSON
    since_bytes: int = 0  # what the differences after it weigh together
    since_count: int = 0  # how many differences there are after it

    def stores_differences(self) -> bool:
        """Whether the next checkpoint may store a difference: not while the state is small (its full checkpoint,
        the newest, weighed under SMALL_STATE_BYTES)."""
        return self.base != self.seq or self.full_bytes >= SMALL_STATE_BYTES

    def wants_full(self, delta_bytes: int, every: int) -> bool:
        """Whether the next checkpoint, whose difference weighs `delta_bytes`, should be full: `every` differences
        are written after a full one at most, and never more than FULL_WHEN_DIFFERENCES_WEIGH times its weight."""
        if self.since_count + 1 >= every:
            return True
        weight = max(self.full_bytes, FULL_FLOOR_BYTES)
        return self.since_bytes + delta_bytes > FULL_WHEN_DIFFERENCES_WEIGH * weight

    def wrote_full(self, seq: int, state: Any, full_bytes: int) -> None:
        self.seq, self.state, self.base, self.full_bytes = seq, state, seq, full_bytes
        self.since_bytes = self.since_count = 0

    def wrote_delta(self, seq: int, state: Any, delta_bytes: int) -> None:
        self.seq, self.state = seq, state
        self.since_bytes += delta_bytes
        self.since_count += 1
