"""A worker's own threads' database calls, kept apart from the forks of its pool's processes.

A prefork worker forks its pool's processes from its main thread while the sweeper's thread, or a timer that
thread armed (durable.runtime.wakes), may be inside a database call. A child forked then inherits the locks that
call held inside the database library, held for good: no thread of the child ever releases them. SQLite's hung
such a child at its first connect, and the worker took no task again (found by the fault drill, docs/fault-drill.md).
Once guarded, a fork waits for those calls to end, and those calls for the fork.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_calls = threading.Lock()
_guarded: list[bool] = []


def guard_forks() -> None:
    """From now on, a fork of this process waits while a call made `between_forks` runs (once per process)."""
    if not _guarded:
        os.register_at_fork(before=_calls.acquire, after_in_parent=_calls.release, after_in_child=_calls.release)
        _guarded.append(True)


@contextmanager
def between_forks() -> Iterator[None]:
    """Around a thread's database calls in a process that forks: no fork happens in the middle of them."""
    with _calls:
        yield
