"""Path converters for the console's ids: a URL that cannot name an object is a 404 before any query runs.

Django's `str` lets a NUL (%00) through to the query, which Postgres refuses (a 500), and its `int` any number
of digits, which SQLite cannot bind (an OverflowError, a 500).
"""
from __future__ import annotations

from durable.engine.ids import OPERATION_ID_PATTERN


class OperationIdConverter:
    """A ledger operation id: 32 lowercase hexadecimal characters (invariant 1, docs/invariants.md)."""

    regex = OPERATION_ID_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class SeqConverter:
    """A checkpoint's sequence number: at most 9 digits, within every database's integer column."""

    regex = "[0-9]{1,9}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


class RowIdConverter(SeqConverter):
    """A row's id (an API token's): at most 18 digits, within a 64-bit integer column."""

    regex = "[0-9]{1,18}"
