"""Keeping a run's lease alive while a call is in flight, so no second worker sends meanwhile (invariant 11).

A worker renews its lease only when it writes. A call (an activity, a downstream, a lookup)
writes nothing while it waits, so without more the lease could run out mid-call: the sweeper
would hand the run to a second worker, which would call again while the first call may still
be in flight. `lease_kept` wraps each such call:

- before the call, it renews the lease unless what is left already covers the call's timeout
  and a margin: a call never starts on a lease that could not outlast it (so, with the HTTP
  timeout well under the lease, the call ends in time even if every heartbeat fails);
- during the call, a thread renews the lease every lease/3, on its own database connection,
  with the same fenced UPDATE as every other write (token, RUNNING, checkpoint seq);
- if a renewal finds the lease gone, the call's outcome is abandoned: `LeaseLost` is raised as
  the call returns, and nothing is written (every write is fenced anyway).

Steps without calls pay nothing: no thread, no extra statement.
"""
from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError, connection

from durable.engine.errors import LeaseLost
from durable.store import Lease, RunStore

log = logging.getLogger("durable.heartbeat")

BEATS_PER_LEASE = 3  # a renewal may fail twice and the lease still holds until the third
MARGIN_SECONDS = 1.0  # kept beyond a call's timeout: a slow commit, the sweeper's clock


class Heartbeat:
    """A thread renewing one lease every `interval` seconds until stopped, or until the lease is lost."""

    def __init__(self, db: RunStore, lease: Lease, *, interval: float | None = None) -> None:
        self._db = db
        self._lease = lease
        self.interval = interval if interval is not None else lease.seconds / BEATS_PER_LEASE
        self.renewals = 0
        self._lost = threading.Event()
        self._stopping = threading.Event()
        context = contextvars.copy_context()  # its log lines carry the run, step and operation ids
        self._thread = threading.Thread(target=context.run, args=(self._beat,), daemon=True,
                                        name=f"durable-heartbeat-{lease.run_id}")

    @property
    def lost(self) -> bool:
        """A renewal found the lease taken by another worker (or the run moved on without us)."""
        return self._lost.is_set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        # A renewal stuck on an unreachable database must not hold the worker: it is fenced, so
        # whenever it lands it extends only a lease this worker still holds.
        self._thread.join(timeout=self.interval)

    def _beat(self) -> None:
        try:
            while not self._stopping.wait(self.interval):
                try:
                    self._db.renew(self._lease)
                except LeaseLost:
                    self._lost.set()
                    log.warning("lease lost while a call was in flight: its outcome will be abandoned")
                    return
                except DatabaseError:  # the next beat tries again; the lease left still covers the call
                    log.warning("could not renew the lease; trying again in %.1fs", self.interval, exc_info=True)
                    connection.close()
                    continue
                self.renewals += 1
        finally:
            connection.close()  # Django's connections are per thread: this one ends with the thread


@contextmanager
def lease_kept(db: RunStore, lease: Lease, *, timeout: float | None = None) -> Iterator[Heartbeat | None]:
    """Hold the lease for as long as the call inside takes; raise LeaseLost after it if it was lost.

    `timeout` is how long the call may take (its client's timeout): DURABLE_HTTP_TIMEOUT_SECONDS
    unless given.
    """
    timeout = settings.DURABLE_HTTP_TIMEOUT_SECONDS if timeout is None else timeout
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
