"""Keeping a run's lease alive while a call is in flight, so no second worker sends meanwhile (invariant 11).

A worker renews its lease only when it writes. A call (an activity, a downstream, a lookup)
writes nothing while it waits, so without more the lease could run out mid-call: the sweeper
would hand the run to a second worker, which would call again while the first call may still
be in flight. `lease_kept` wraps each such call:

- before the call, it renews the lease unless what is left already covers the call's timeout
  and a margin: a call never starts on a lease that could not outlast it (so, with the HTTP
  timeout well under the lease, the call ends in time even if every heartbeat fails);
- during the call, the process's heartbeat thread renews the lease every lease/3, on its own
  database connection, with the same fenced UPDATE as every other write (token, RUNNING,
  checkpoint seq);
- if a renewal finds the lease gone, the call's outcome is abandoned: `LeaseLost` is raised as
  the call returns, and nothing is written (every write is fenced anyway).

Between calls, for as long as the worker holds the run, `kept_alive` renews the lease when
nothing else did within a third of it (a long step, a slow checkpoint write), so the lease can be
short (DURABLE_LEASE_SECONDS, 10 s by default) and a killed worker's runs are taken over seconds
after it died (docs/operations.md). A run that ends within a third of its lease, as most tasks
do, pays nothing: no statement, no thread woken (registering is a dict update).
"""
from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection

from durable.conf import durable_settings
from durable.engine.errors import LeaseLost
from durable.store import Lease, RunStore

log = logging.getLogger("durable.heartbeat")  # the name operators filter on, kept across the move to runtime/

BEATS_PER_LEASE = 3  # a renewal may fail twice and the lease still holds until the third
MARGIN_SECONDS = 1.0  # kept beyond a call's timeout: a slow commit, the sweeper's clock
IDLE_WAKE_SECONDS = 1.0  # how often the idle thread looks for beats falling due (no wake-up per claim)


class Heartbeat:
    """A claim on the lease, for one call or for as long as a run is held: renewed every `interval` seconds by
    the process's heartbeat thread (only when nothing else renewed it, with `when_stale`)."""

    def __init__(self, db: RunStore, lease: Lease, *, interval: float | None = None, when_stale: bool = False) -> None:
        self.db = db
        self.lease = lease
        self.interval = interval if interval is not None else lease.seconds / BEATS_PER_LEASE
        # Renew only when nothing else renewed within the interval (kept_alive: a step's write or a
        # call's heartbeat may have); a call's own heartbeat renews at every beat.
        self.when_stale = when_stale
        self.due = 0.0
        self.renewals = 0
        self.context = contextvars.copy_context()  # its log lines carry the run, step and operation ids
        self._lost = threading.Event()

    @property
    def lost(self) -> bool:
        """A renewal found the lease taken by another worker (or the run moved on without us)."""
        return self._lost.is_set()

    @property
    def running(self) -> bool:
        return _heart.beating(self)

    def start(self) -> Heartbeat:
        self.due = time.monotonic() + self.interval
        _heart.add(self)
        return self

    def stop(self) -> None:
        _heart.remove(self)

    def beat(self) -> bool:
        """Renew once; False when the lease is lost and there is nothing more to renew."""
        since = time.monotonic() - self.lease.renewed_at
        if self.when_stale and since < self.interval * 0.9:
            self.due = time.monotonic() + self.interval - since
            return True
        try:
            self.db.renew(self.lease)
        except LeaseLost:
            self._lost.set()
            if self.when_stale:  # between calls: the worker's next write finds it and stops (unless it just ended)
                log.info("lease no longer held by this worker; its next write will stop the run's task")
            else:
                log.warning("lease lost while a call was in flight: its outcome will be abandoned")
            return False
        except DatabaseError:  # the next beat tries again; the lease left still covers the call
            log.warning("could not renew the lease; trying again in %.1fs", self.interval, exc_info=True)
            connection.close()
        else:
            self.renewals += 1
        self.due = time.monotonic() + self.interval
        return True


class _Heart:
    """The one thread per process that renews the leases of the calls in flight.

    Starting a thread per call would cost each call a thread handoff (about a millisecond on a
    busy machine); registering with this one is a dict update. It sleeps while no call is in
    flight and closes its database connection then (Django's connections are per thread).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._beats: dict[int, Heartbeat] = {}
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._wake_at = 0.0  # when the thread next looks at its beats (monotonic)

    def add(self, beat: Heartbeat) -> None:
        with self._changed:
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()  # a forked pool child inherits no threads: start its own
                self._thread = threading.Thread(target=self._run, name="durable-heartbeat", daemon=True)
                self._thread.start()
            self._beats[id(beat)] = beat
            if beat.due < self._wake_at:  # else the thread finds it at its next look, in time
                self._changed.notify()

    def remove(self, beat: Heartbeat) -> None:
        with self._changed:
            self._beats.pop(id(beat), None)

    def beating(self, beat: Heartbeat) -> bool:
        with self._changed:
            return id(beat) in self._beats

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                if not self._beats:
                    connection.close()  # idle: hold no connection
                    self._wait_until(now + IDLE_WAKE_SECONDS, now)
                    continue
                due = [beat for beat in self._beats.values() if beat.due <= now]
                if not due:
                    self._wait_until(min(now + IDLE_WAKE_SECONDS, *(beat.due for beat in self._beats.values())), now)
                    continue
            for beat in due:
                if not beat.context.run(beat.beat):
                    self.remove(beat)

    def _wait_until(self, wake_at: float, now: float) -> None:
        # Called holding the condition: add() compares a new beat's due time with _wake_at.
        self._wake_at = wake_at
        self._changed.wait(wake_at - now)
        self._wake_at = 0.0  # awake: add() need not notify


_heart = _Heart()


@contextmanager
def kept_alive(db: RunStore, lease: Lease) -> Iterator[None]:
    """Renew the lease while the worker holds the run, whenever nothing else did for a third of it."""
    if connection.in_atomic_block:  # as in lease_kept: a renewal from another connection would only wait
        yield
        return
    beat = Heartbeat(db, lease, when_stale=True).start()
    try:
        yield
    finally:
        beat.stop()


@contextmanager
def lease_kept(db: RunStore, lease: Lease, *, timeout: float | None = None) -> Iterator[Heartbeat | None]:
    """Hold the lease for as long as the call inside takes; raise LeaseLost after it if it was lost.

    `timeout` is how long the call may take (its client's timeout): DURABLE_HTTP_TIMEOUT_SECONDS
    unless given.
    """
    timeout = durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS if timeout is None else timeout
    db.confirm_writes()  # no call leaves on a lease the last step's write may have found lost
    if lease.seconds_left() < timeout + MARGIN_SECONDS:
        db.renew(lease)  # never start a call on a lease that may run out before it returns
    if connection.in_atomic_block:
        # The caller holds a transaction open: no other worker sees this claim, and a renewal on
        # another connection would only wait for that transaction's lock.
        yield None
        return
    beat = Heartbeat(db, lease).start()
    try:
        yield beat
    finally:
        beat.stop()
        if beat.lost:  # replaces whatever the call raised: the fence says nothing of it may be recorded
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} was taken while a call was in flight")
