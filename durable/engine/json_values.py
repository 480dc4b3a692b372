"""JSON values the database can store: one rule, refused with a reason or repaired into a storable copy.

Python's json module reads more than JSON: NaN and Infinity, numbers that overflow a double to infinity
(1e999), and "\\ud800" escapes that decode to a lone UTF-16 surrogate. None of these can be stored (Postgres's
jsonb refuses them, UTF-8 cannot encode a lone surrogate, canonical JSON refuses NaN), so a field that
let them through answered 500. Every form and API field that takes JSON goes through `parse_json` (for text)
or `check_storable` (for a value a parser already read).

Workflow code and downstreams produce such values too (an LLM's output, an error's text). What workflow code
chose before anything happened (a step's state, an activity's result, a side effect's payload, an approval's
snapshot) is refused with `check_storable`; what already happened (a downstream's answer, an error) is recorded
as `storable_copy`/`storable_text` makes it.
"""
from __future__ import annotations

import json
import math
from typing import Any

# Objects and lists nested deeper than this are refused: no workflow needs more, and the checks and
# encoders that walk a value recursively (json.dumps, pydantic) would hit Python's recursion limit.
MAX_JSON_DEPTH = 100
TOO_DEEP = f"must not nest objects and lists more than {MAX_JSON_DEPTH} levels deep"
NOT_FINITE = "must hold finite numbers only: NaN, Infinity and numbers too large for a double (such as 1e999) " \
             "cannot be stored"
HAS_NUL = "must not contain NUL (\\u0000) characters"
HAS_SURROGATE = "must not contain a lone surrogate (an unpaired \\ud800-\\udfff escape): it is not text"


class UnstorableJSON(ValueError):
    """JSON text or a value the database cannot store; the message says why, for a field error.

    `path` is where in the value the problem is (keys and list indexes from the top; empty for the value
    itself or for text that does not parse), for messages that must say which field to look at.
    """

    def __init__(self, problem: str, path: tuple[Any, ...] = ()) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path = path

    @property
    def detail(self) -> str:
        """The problem and where it is: "field notes[2] must not contain NUL (\\u0000) characters"."""
        return f"field {format_path(self.path)} {self.problem}" if self.path else f"it {self.problem}"


def format_path(path: tuple[Any, ...]) -> str:
    """`notes[2].text`: a key that is not a plain name is shown as its repr (so a NUL in it is shown escaped)."""
    shown = ""
    for part in path:
        if isinstance(part, str) and part.isidentifier() and part.isascii():
            shown += f".{part}" if shown else part
        else:
            shown += f"[{part!r}]"
    return shown


def _refuse_constant(name: str) -> Any:
    raise UnstorableJSON(NOT_FINITE)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise UnstorableJSON(NOT_FINITE)
    return value


def parse_json(text: str) -> Any:
    """The value of JSON text, or UnstorableJSON saying what is wrong with it."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except UnstorableJSON:
        raise
    except json.JSONDecodeError as exc:
        raise UnstorableJSON(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise UnstorableJSON(TOO_DEEP) from None
    except ValueError as exc:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise UnstorableJSON(f"not valid JSON ({exc})") from None
    check_storable(value)
    return value


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return HAS_NUL
    if not text.isascii():  # O(1) in CPython: most text never pays for the encode below
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return HAS_SURROGATE
    return None


def _scalar_problem(item: Any) -> str | None:
    if isinstance(item, str):
        return _text_problem(item)
    if isinstance(item, float) and not math.isfinite(item):
        return NOT_FINITE
    return None


def check_storable(value: Any) -> None:
    """Raise UnstorableJSON if a value nests too deep, or holds a non-finite number, a NUL or a lone surrogate
    anywhere (in a key or a string); the error's `path` says where. Walked without recursion, so any depth is
    safe to check.

    The executor checks every step's state with it, so it is written for speed: exact types are tested first
    (a 5-field state takes about a microsecond), and a string is only encoded when it is not ASCII.
    """
    problem = _scalar_problem(value)
    if problem:
        raise UnstorableJSON(problem)
    if not isinstance(value, dict | list | tuple):
        return
    containers: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while containers:
        item, depth, path = containers.pop()
        if depth > MAX_JSON_DEPTH:
            raise UnstorableJSON(TOO_DEEP, path)
        for key, child in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(key, str) and ("\x00" in key or not key.isascii()):
                problem = _text_problem(key)
                if problem:
                    raise UnstorableJSON(problem, (*path, key))
            cls = type(child)
            if cls is str:
                problem = _text_problem(child) if "\x00" in child or not child.isascii() else None
            elif cls is int or cls is bool or child is None:
                continue
            elif cls is dict or cls is list or isinstance(child, dict | list | tuple):
                containers.append((child, depth + 1, (*path, key)))
                continue
            else:
                problem = _scalar_problem(child)
            if problem:
                raise UnstorableJSON(problem, (*path, key))


# What a recorded fact gets in place of what cannot be stored (storable_copy).
REPLACEMENT_CHARACTER = "\ufffd"


def storable_text(text: str) -> str:
    """`text` with each NUL and each lone surrogate replaced by U+FFFD; the same object when there is none.

    A high and low surrogate side by side are read as the one character they encode in UTF-16 (as a
    JavaScript string would hold an emoji); any other surrogate is not text and becomes U+FFFD.
    """
    problem = _text_problem(text)
    if problem is None:
        return text
    if problem == HAS_NUL:
        text = text.replace("\x00", REPLACEMENT_CHARACTER)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable_copy(value: Any) -> Any:
    """A copy of a value the database can store, for facts that must be recorded whatever they hold (what a
    downstream answered, an error's text): `value` itself when it passes `check_storable`; otherwise NUL and
    lone surrogates in strings and keys become U+FFFD (`storable_text`), NaN and +/-Infinity become None
    (JSON's null, as JavaScript's JSON.stringify and pydantic write them), tuples become lists (as JSON
    writes them), and objects and lists nested deeper than MAX_JSON_DEPTH become None. Two keys that differ
    only in what was replaced become one key (the later value is kept).
    """
    try:
        check_storable(value)
    except UnstorableJSON:
        return _repaired(value, 1)
    return value


def _repaired(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict | list | tuple):
        if depth > MAX_JSON_DEPTH:  # recursion is bounded by this depth
            return None
        if isinstance(value, dict):
            return {storable_text(key) if isinstance(key, str) else key: _repaired(child, depth + 1)
                    for key, child in value.items()}
        return [_repaired(child, depth + 1) for child in value]
    return value
