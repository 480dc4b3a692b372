"""JSON a client sends for a field: parsed in one place, and refused, with a reason, when the database cannot store it.

Python's json module reads more than JSON: NaN and Infinity, numbers that overflow a double to infinity
(1e999), and "\\ud800" escapes that decode to a lone UTF-16 surrogate. None of these can be stored (Postgres's
jsonb refuses them, UTF-8 cannot encode a lone surrogate, canonical JSON refuses NaN), so a field that
let them through answered 500. Every form and API field that takes JSON goes through `parse_json` (for text)
or `check_storable` (for a value a parser already read).
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
    """JSON text or a value the database cannot store; the message says why, for a field error."""


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
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return HAS_SURROGATE
    return None


def check_storable(value: Any) -> None:
    """Raise UnstorableJSON if a parsed value nests too deep, or holds a non-finite number, a NUL or a lone
    surrogate anywhere (in a key or a string); walked without recursion, so any depth is safe to check."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
        elif isinstance(item, float):
            problem = None if math.isfinite(item) else NOT_FINITE
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                raise UnstorableJSON(TOO_DEEP)
            problem = None
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
        else:
            problem = None
        if problem:
            raise UnstorableJSON(problem)
