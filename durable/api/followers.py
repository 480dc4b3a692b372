"""The runs this web process's clients follow, and the one thread that reads what their steps publish.

Each stream response (durable/api/stream.py) registers a `Follower` and waits on its queue: it holds a thread of
the web server, never a database connection. One thread per process (`Hub`) reads, every
DURABLE_STREAM_POLL_SECONDS while anyone follows, the followed runs' statuses and then their chunks published since
each follower's last one, in two queries whatever the number of followers, and hands each follower what is new,
then `Ended` once its run ended or waits. The database is the transport: it works the same on SQLite (the embedded
default) and on Postgres across machines, and a follower reconnecting with Last-Event-ID reads the same rows
(docs/operations.md, "Streams", says why this and not Redis or LISTEN/NOTIFY).

Statuses are read before chunks: a run seen ended has committed every chunk it published, so the chunk read that
follows sees them all before `Ended` is handed over. A run's chunks commit in id order (durable/runtime/stream.py
publishes them one at a time per run, each committed before `ctx.stream` returns), so `id > last` per run misses
none.
"""
from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import DatabaseError, connection
from django.db.models import Q

from durable.conf import durable_settings
from durable.engine.streams import Chunk, follows
from durable.models import Run, StreamChunk

log = logging.getLogger("durable.streams")
BATCH = 1000  # chunks read per poll: more wait for the next one, in order


@dataclass(frozen=True)
class Ended:
    """The run ended or waits: its follower sends the end event and closes."""

    status: str
    waiting_for: Any


@dataclass(eq=False)
class Follower:
    """One client's stream of one run: `after` is the last chunk id it was handed."""

    run_id: UUID
    after: int
    inbox: queue.SimpleQueue[list[Chunk] | Ended] = field(default_factory=queue.SimpleQueue)


def read_chunks(condition: Q, limit: int = BATCH) -> list[tuple[UUID, Chunk]]:
    """The chunks matching `condition`, oldest first, each with its run's id."""
    rows = StreamChunk.objects.filter(condition).order_by("id")[:limit]
    return [(row.run_id, Chunk(row.id, row.kind, row.step, row.visit, row.attempt, row.data,
                               row.published_at.isoformat())) for row in rows]


class Hub:
    """This process's followers and the thread that feeds them; the thread runs only while someone follows."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._followers: set[Follower] = set()
        self._thread: threading.Thread | None = None

    def follow(self, run_id: UUID, after: int) -> Follower:
        follower = Follower(run_id, after)
        with self._lock:
            self._followers.add(follower)
            if self._thread is None:
                self._thread = threading.Thread(target=self._feed, name="durable-stream-hub", daemon=True)
                self._thread.start()
        return follower

    def leave(self, follower: Follower) -> None:
        with self._lock:
            self._followers.discard(follower)

    def _feed(self) -> None:
        try:
            while (followers := self._current()):
                try:
                    self.poll(followers)
                except DatabaseError:  # the database away for a moment: the next poll tries again
                    log.warning("reading the followed runs' streams failed", exc_info=True)
                    connection.close()
                threading.Event().wait(float(durable_settings.DURABLE_STREAM_POLL_SECONDS))
        finally:
            connection.close()  # nobody follows: the hub holds no connection until someone does

    def _current(self) -> list[Follower]:
        """The followers now; when none, the thread ends (under the lock, so a new follower starts another)."""
        with self._lock:
            if not self._followers:
                self._thread = None
            return list(self._followers)

    def poll(self, followers: list[Follower]) -> None:
        """One read for every follower: statuses first, then each run's chunks after its followers' oldest."""
        runs = {f.run_id for f in followers}
        statuses = {run_id: (status, waiting_for) for run_id, status, waiting_for in
                    Run.objects.filter(id__in=runs).values_list("id", "status", "waiting_for")}
        oldest: dict[UUID, int] = {}
        for f in followers:
            oldest[f.run_id] = min(f.after, oldest.get(f.run_id, f.after))
        condition = Q()
        for run_id, after in oldest.items():
            condition |= Q(run_id=run_id, id__gt=after)
        chunks = read_chunks(condition)
        by_run: dict[UUID, list[Chunk]] = {}
        for run_id, chunk in chunks:
            by_run.setdefault(run_id, []).append(chunk)
        complete = len(chunks) < BATCH  # else more chunks wait: no follower is told its run ended yet
        for f in followers:
            new = [chunk for chunk in by_run.get(f.run_id, []) if chunk.id > f.after]
            if new:
                f.after = new[-1].id
                f.inbox.put(new)
            status, waiting_for = statuses.get(f.run_id, ("", None))
            if complete and not follows(status):
                f.inbox.put(Ended(status, waiting_for))
                self.leave(f)  # told once; its response ends


hub = Hub()  # this process's
