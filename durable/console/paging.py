"""Keyset pages: a marker says where a list's next page starts, as the (time, key) of the last row shown."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.utils.dateparse import parse_datetime

Key = TypeVar("Key")
SEPARATOR = "~"


def page_marker(when: datetime, key: Any) -> str:
    """The marker of a row ordered by (when, key): the list's next page starts just after it."""
    return f"{when.isoformat()}{SEPARATOR}{key}"


def read_page_marker(value: str, key: Callable[[str], Key]) -> tuple[datetime, Key] | None:
    """The (time, key) a page_marker wrote, the key read by `key` (which raises ValueError on a bad one); None for
    anything else, which each list refuses in its own words."""
    when, _, written_key = value.partition(SEPARATOR)
    try:
        parsed = parse_datetime(when)
        if parsed is not None and parsed.tzinfo is not None:
            return parsed, key(written_key)
    except ValueError:
        pass
    return None
