"""Peak Postgres connections and peak worker memory while a benchmark runs, sampled on a thread of its own.

Connections: `pg_stat_activity`'s client backends, the whole server's and the benchmark database's, every
`interval` seconds, on a connection of the sampler's own; the benchmark's own connections (the sampler's and
those whose backend pids the caller names) are left out of the database's count and of the server's.
Memory: the resident set (VmRSS) of the given processes and every descendant of theirs, summed, from /proc.
CPU: the time (user + system) those processes used while sampled, and the benchmark database's Postgres backends
(when the server runs on this machine), from /proc: what a change saves, less noisy than the wall time on a shared
machine.
The sampler also says when the server's connections ran out, or nearly (`exhausted`), so a benchmark can stop
its workers instead of leaving every client of the server refused.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from durable.tools.bench.cpu import process_cpu_seconds

# Connections the server keeps for superusers, and a margin: at this many from max_connections it has run out.
EXHAUSTED_MARGIN = 5
# How often the processes' descendants are looked for again: finding them reads a file per thread of each process
# (/proc/<pid>/task/<tid>/children), and a worker with a thousand threads made that the benchmark's largest cost
# (15 s of CPU in a run of 2,000 agents, beside the workers it measured).
DESCENDANTS_SECONDS = 2.0


def descendants(pids: Iterable[int]) -> list[int]:
    """These processes and all their descendants (a prefork pool's children), from /proc."""
    found: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.append(pid)
        todo.extend(_children(pid))
    return found


def rss_bytes(pids: Iterable[int]) -> int:
    """The resident set of these processes and all their descendants, summed (0 for one that is gone)."""
    return sum(_vm_rss(pid) for pid in descendants(pids))


def _used(first: dict[int, float], last: dict[int, float]) -> float:
    return sum(used - first.get(pid, 0.0) for pid, used in last.items())


def _vm_rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return found


class Peaks:
    """Start with `with Peaks(database_url, pids=...)`; read the peaks after (or while) it runs."""

    def __init__(self, database_url: str, *, pids: Callable[[], Iterable[int]], own_backends: Iterable[int] = (),
                 interval: float = 0.1) -> None:
        self.database_url = database_url
        self.pids = pids
        self.own_backends = set(own_backends)
        self.interval = interval
        self.server_connections = 0  # peak, every database of the server
        self.database_connections = 0  # peak, the benchmark's database
        self.rss_bytes = 0  # peak, the processes `pids` names and their descendants
        self.max_connections = 0
        self.exhausted = False
        self.samples = 0
        self._cpu_first: dict[int, float] = {}  # per process: its CPU time when first seen, and when last seen
        self._cpu_last: dict[int, float] = {}
        self._backend_first: dict[int, float] = {}  # the same for this database's Postgres backends
        self._backend_last: dict[int, float] = {}
        self._descendants: list[int] = []
        self._descendants_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="durable-bench-peaks", daemon=True)

    @property
    def cpu_seconds(self) -> float:
        """CPU time the processes (and descendants) used while sampled: since the start, for those seen then."""
        return _used(self._cpu_first, self._cpu_last)

    @property
    def backend_cpu_seconds(self) -> float:
        """CPU time this database's Postgres backends used while sampled (when the server runs on this machine)."""
        return _used(self._backend_first, self._backend_last)

    @property
    def rss_mb(self) -> float:
        return self.rss_bytes / 1024 / 1024

    def __enter__(self) -> Peaks:
        import psycopg

        self._conn = psycopg.connect(self.database_url, autocommit=True)
        row = self._conn.execute("SELECT current_setting('max_connections')::int, pg_backend_pid()").fetchone()
        assert row is not None
        self.max_connections = row[0]
        self.own_backends.add(row[1])
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            self.sample()  # the last moment counts too
        except Exception:  # noqa: BLE001 - as in _sample: the peaks so far stand
            pass
        finally:
            self._conn.close()

    def sample(self) -> None:
        row = self._conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE datname = current_database()), "
            "coalesce(array_agg(pid) FILTER (WHERE datname = current_database()), '{}') FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND NOT pid = ANY(%s)", [list(self.own_backends)]).fetchone()
        assert row is not None
        server, database, backends = row
        self.server_connections = max(self.server_connections, server)
        self.database_connections = max(self.database_connections, database)
        if server + len(self.own_backends) >= self.max_connections - EXHAUSTED_MARGIN:
            self.exhausted = True
        self.sample_processes(backends)

    def sample_processes(self, backends: Iterable[int] = ()) -> None:
        """The /proc half of a sample: the processes' memory, their CPU and the backends' (on this machine only:
        a remote server's /proc is not ours, and its backends count 0). A process first seen after the first
        sample counts from 0: it started meanwhile."""
        processes = self._processes()
        self.rss_bytes = max(self.rss_bytes, sum(_vm_rss(pid) for pid in processes))
        for pids, first, last in ((processes, self._cpu_first, self._cpu_last),
                                  (backends, self._backend_first, self._backend_last)):
            for pid in pids:
                used = process_cpu_seconds(pid)
                if used:
                    first.setdefault(pid, used if not self.samples else 0.0)
                    last[pid] = used
        self.samples += 1

    def _processes(self) -> list[int]:
        """The processes measured and their descendants, looked for again every DESCENDANTS_SECONDS."""
        pids = list(self.pids())
        now = time.monotonic()
        if now >= self._descendants_at or any(pid not in self._descendants for pid in pids):
            self._descendants, self._descendants_at = descendants(pids), now + DESCENDANTS_SECONDS
        return self._descendants

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a failed sample (the server refusing) is not the benchmark's failure
                self.exhausted = self.exhausted or self._conn.closed
