"""Log lines that say which run, step, attempt and operation they belong to, as JSON or as text.

The executor binds the run, its workflow and version, the step and the attempt; the
side-effect layer binds the operation id. A filter on the handler copies them onto every
record, whichever logger wrote it (durable's, Celery's, httpx's), so a line written deep
inside a step needs no `extra=`.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

FIELDS = ("run_id", "workflow", "version", "step", "attempt", "operation_id")

# Read-only, so the shared default cannot be changed in place: bound() always sets a new mapping.
_bound: ContextVar[Mapping[str, Any]] = ContextVar("durable_log_context", default=MappingProxyType({}))
# What every LogRecord has of its own; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add these fields to every log line written inside the block (this thread or task only)."""
    token = _bound.set({**_bound.get(), **{name: _plain(value) for name, value in fields.items()}})
    try:
        yield
    finally:
        _bound.reset(token)


def current() -> dict[str, Any]:
    """The fields bound here now."""
    return dict(_bound.get())


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)


class RunContextFilter(logging.Filter):
    """Puts the bound fields on each record; a field the caller passed in `extra=` wins."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _bound.get()
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, context.get(name))
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {name: value for name, value in record.__dict__.items()
            if name not in _RECORD_ATTRIBUTES and name not in FIELDS and not name.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the run's fields (null when none), extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({name: _plain(getattr(record, name, None)) for name in FIELDS})
        entry.update(_extras(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, then `[run=... step=... attempt=...]` with the fields this line has."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(f"{name}={getattr(record, name)}" for name in FIELDS
                          if getattr(record, name, None) is not None)
        if not fields:
            return line
        first, newline, rest = line.partition("\n")  # keep a traceback below the line it belongs to
        return f"{first} [{fields}]{newline}{rest}"
