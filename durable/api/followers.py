"""The runs this web process's clients follow, and the one thread that reads what their steps publish.

Each stream response (durable/api/stream.py) registers a `Follower` and waits on its queue: it holds a thread of
the web server, never a database connection. One thread per process (`Hub`), while anyone follows, reads the
followed runs' statuses and then their chunks published since each follower's last one, in two queries whatever
the number of followers, and hands each follower what is new, then `Ended` once its run ended or waits. The rows
are the stream: it works the same on SQLite (the embedded default) and on Postgres across machines, and a follower
reconnecting with Last-Event-ID reads the same rows.

When it reads is the transport (DURABLE_STREAM_TRANSPORT; docs/operations.md, "Streams", gives the measured
costs): `poll` reads every DURABLE_STREAM_POLL_SECONDS. `notify` (Postgres) LISTENs on the thread's own
connection, the one it reads with (no connection more), for the NOTIFY a worker sends with the run's id once each
chunk committed (durable/runtime/stream.py), and on one naming a followed run reads that run's chunks (at most once per
DURABLE_STREAM_POLL_SECONDS: the runs notified meanwhile are read together); it reads everything, statuses too, when
a follower joins and every FALLBACK_SECONDS, which covers a notification lost (a worker's NOTIFY never sent, a
reconnect) and notices the runs that ended.

Statuses are read before chunks: a run seen ended has committed every chunk it published, so the chunk read that
follows sees them all before `Ended` is handed over. A run's chunks commit in id order (durable/runtime/stream.py
publishes them one at a time per run, each committed before `ctx.stream` returns), so `id > last` per run misses
none.
"""
from __future__ import annotations

import logging
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import DatabaseError, connection
from django.db.models import Q

from durable.conf import durable_settings
from durable.engine.streams import CHANNEL, NOTIFY, POLL, Chunk, follows, transport_of
from durable.models import Run, StreamChunk

log = logging.getLogger("durable.streams")
BATCH = 1000  # chunks read per poll: more wait for the next one, in order
FALLBACK_SECONDS = 1.0  # notify: the full read that covers a lost notification and notices the runs that ended


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
        self._joined: set[Follower] = set()  # not yet read by the thread: their first read is a full one
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None  # a pipe: a joining follower wakes a thread waiting on NOTIFY
        self.queries = 0  # the thread's statements, for durable_bench --stream's count of the load it causes

    def follow(self, run_id: UUID, after: int) -> Follower:
        follower = Follower(run_id, after)
        with self._lock:
            self._followers.add(follower)
            self._joined.add(follower)
            if self._wake is None:
                self._wake = os.pipe()  # in the web worker process, after any fork: its own
                for end in self._wake:
                    os.set_blocking(end, False)
            if self._thread is None:
                self._thread = threading.Thread(target=self._feed, name="durable-stream-hub", daemon=True)
                self._thread.start()
        try:
            os.write(self._wake[1], b"j")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already (nobody drains it under `poll`)
        return follower

    def leave(self, follower: Follower) -> None:
        with self._lock:
            self._followers.discard(follower)
            self._joined.discard(follower)

    def _feed(self) -> None:
        notify = transport_of(durable_settings.DURABLE_STREAM_TRANSPORT, connection.vendor) == NOTIFY
        listening, began, queries = False, time.monotonic(), self.queries
        try:
            with connection.execute_wrapper(self._count):
                while (followers := self._current()):
                    try:
                        gap = float(durable_settings.DURABLE_STREAM_POLL_SECONDS)
                        if not notify:
                            self._take_joined()
                            self.poll(followers)
                            threading.Event().wait(gap)
                            continue
                        if not listening:
                            with connection.cursor() as cursor:
                                cursor.execute(f"LISTEN {CHANNEL}")
                            listening, next_full = True, 0.0  # then a full read: what came before the LISTEN
                        if time.monotonic() >= next_full:
                            self._take_joined()
                            self.poll(followers)
                            next_full = time.monotonic() + FALLBACK_SECONDS
                        elif (joined := self._take_joined()):
                            self.poll(joined)
                        # At most one read per gap: runs publishing at once are read together, as `poll` would.
                        if (notified := self._notified(followers, next_full, time.monotonic() + gap)):
                            while not self.poll([f for f in followers if f.run_id in notified], statuses=False):
                                pass  # a batch full: read on at once
                    except DatabaseError:  # the database away for a moment: read again (and listen again) soon
                        log.warning("reading the followed runs' streams failed", exc_info=True)
                        if listening:
                            _unlisten()
                        connection.close()
                        listening = False
                        threading.Event().wait(float(durable_settings.DURABLE_STREAM_POLL_SECONDS))
                if listening:
                    _unlisten()
        finally:
            connection.close()  # nobody follows: the hub holds no connection until someone does
            log.info("stream hub: %d queries in %.1f s while following (%s)", self.queries - queries,
                     time.monotonic() - began, NOTIFY if notify else POLL)

    def _count(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.queries += 1
        return execute(sql, params, many, context)

    def _current(self) -> list[Follower]:
        """The followers now; when none, the thread ends (under the lock, so a new follower starts another)."""
        with self._lock:
            if not self._followers:
                self._thread = None
            return list(self._followers)

    def _take_joined(self) -> list[Follower]:
        with self._lock:
            joined, self._joined = list(self._joined), set()
        return joined

    def _notified(self, followers: list[Follower], until: float, not_before: float) -> set[UUID]:
        """Wait on the listening connection for notifications naming followed runs, and return them once
        `not_before` passed; return sooner when a follower joins, and at `until` (the full read) whatever came. A
        notification for a run nobody here follows wakes the thread, no query."""
        assert self._wake is not None
        raw = connection.connection
        followed = {str(f.run_id): f.run_id for f in followers}
        named: set[UUID] = set()
        while (left := until - time.monotonic()) > 0:
            # Those psycopg received while the thread read, then any waiting on the socket, without waiting.
            with connection.wrap_database_errors:  # psycopg's errors as Django's: a lost connection is a DatabaseError
                named |= {followed[n.payload] for n in raw.notifies(timeout=0) if n.payload in followed}
            if named and (early := not_before - time.monotonic()) <= 0:
                break
            ready, _, _ = select.select([raw.fileno(), self._wake[0]], [], [], min(left, early) if named else left)
            if self._wake[0] in ready:
                _drain(self._wake[0])
                break
        return named

    def poll(self, followers: list[Follower], statuses: bool = True) -> bool:
        """One read for these followers: statuses first (unless told not to: then no follower is told its run
        ended), then each run's chunks after its followers' oldest. False when a batch was full: more wait."""
        runs = {f.run_id for f in followers}
        found = {run_id: (status, waiting_for) for run_id, status, waiting_for in
                 Run.objects.filter(id__in=runs).values_list("id", "status", "waiting_for")} if statuses else {}
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
            if not statuses:
                continue
            status, waiting_for = found.get(f.run_id, ("", None))
            if complete and not follows(status):
                f.inbox.put(Ended(status, waiting_for))
                self.leave(f)  # told once; its response ends
        return complete


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _unlisten() -> None:
    """Stop listening before the connection goes back to the pool, and drop what psycopg kept: the next thread
    to take it must not receive this one's notifications."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("UNLISTEN *")
        with connection.wrap_database_errors:
            for _ in connection.connection.notifies(timeout=0):
                pass
    except DatabaseError:
        log.warning("could not stop listening on the stream's channel", exc_info=True)


hub = Hub()  # this process's
