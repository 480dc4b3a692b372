"""Counting the SQL commits a process makes: atomic blocks committed, plus writes in autocommit."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

_WRITES = ("INSERT", "UPDATE", "DELETE", "WITH", "REPLACE")


class CommitCounter:
    def __init__(self) -> None:
        self.commits = 0

    def execute_wrapper(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if connection.get_autocommit() and sql.lstrip().upper().startswith(_WRITES):
            self.commits += 1  # a write outside a transaction is its own commit
        return result

    def install(self) -> None:
        """Count for the life of this process (the benchmark's workers)."""
        connection.execute_wrappers.append(self.execute_wrapper)
        real_commit = connection.commit

        def counted_commit() -> None:
            real_commit()
            self.commits += 1

        connection.commit = counted_commit  # type: ignore[method-assign]  # wraps this connection's own


@contextmanager
def count_commits() -> Iterator[CommitCounter]:
    counter = CommitCounter()
    real_commit = connection.commit

    def counted_commit() -> None:
        real_commit()
        counter.commits += 1

    connection.commit = counted_commit  # type: ignore[method-assign]  # wraps this connection's own
    try:
        with connection.execute_wrapper(counter.execute_wrapper):
            yield counter
    finally:
        del connection.commit  # the instance attribute; the class's method shows through again
