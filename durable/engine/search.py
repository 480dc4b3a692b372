"""The search box's text rule, one for what a run is indexed by and for what an operator types: case folded."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

LINE = "\n"  # between two fields' values; a search never holds one, so a match never spans two fields


def fold(text: str) -> str:
    """Any case matches any case: what is stored and what is searched go through this one function."""
    return text.lower()


def searchable_fields(data: Mapping[str, Any], names: Iterable[str]) -> dict[str, str]:
    """The named input fields that hold a value, as text: a number or a string, not a list or an object."""
    found = {}
    for name in names:
        value = data.get(name)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) != "":
            found[name] = str(value)
    return found


def field_text(fields: Mapping[str, str]) -> str:
    return LINE.join(fold(value.replace(LINE, " ")) for value in fields.values())
