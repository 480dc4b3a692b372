"""CPU seconds a benchmark worker spends, and its Postgres backends spend for it, read from /proc.

A worker reads both itself: its own process, and the backend behind each connection it used
(psycopg names its pid; Postgres on this machine, so /proc/<pid>/stat is readable). Counted
from the worker's first task, so start-up and imports are left out.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int | str = "self") -> float | None:
    """utime + stime of a process, or None when it is gone or not on this machine."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime and stime, fields 14 and 15


def backend_pid() -> int | None:
    """The Postgres backend behind this process's Django connection, if it has one open."""
    from django.db import connection

    raw = connection.connection
    info = getattr(raw, "info", None)
    return getattr(info, "backend_pid", None)


@dataclass
class CpuMeter:
    """This worker's CPU and its backends' since `start()`: {pid: (at first sight, latest)}."""

    worker_start: float | None = None
    worker_now: float = 0.0
    backends: dict[int, tuple[float, float]] = field(default_factory=dict)

    def start(self) -> None:
        if self.worker_start is None:
            self.worker_start = process_cpu_seconds() or 0.0
        self._see_backend()

    def sample(self) -> None:
        self.worker_now = process_cpu_seconds() or 0.0
        self._see_backend()
        for pid, (first, _) in list(self.backends.items()):
            latest = process_cpu_seconds(pid)
            if latest is not None:  # a closed backend keeps the last figure read
                self.backends[pid] = (first, latest)

    def _see_backend(self) -> None:
        from durable.store import batched

        for pid in (backend_pid(), batched.backend_pid()):  # the thread's connection's, and the writer's
            if pid is not None and pid not in self.backends:
                seconds = process_cpu_seconds(pid)
                if seconds is not None:
                    self.backends[pid] = (seconds, seconds)

    def as_json(self) -> dict[str, float]:
        return {"worker_cpu": self.worker_now - (self.worker_start or 0.0),
                "backend_cpu": sum(latest - first for first, latest in self.backends.values())}
