"""Keeping a run's lease alive while a call is in flight, so no second worker sends meanwhile (invariant 11).

A worker renews its lease only when it writes. A call (an activity, a downstream, a lookup)
writes nothing while it waits, so without more the lease could run out mid-call: the sweeper
would hand the run to a second worker, which would call again while the first call may still
be in flight. `lease_kept` wraps each such call:

- before the call, it renews the lease unless what is left already covers the call's timeout
  and a margin: a call never starts on a lease that could not outlast it (so, with the HTTP
  timeout well under the lease, the call ends in time even if every heartbeat fails);
- then it gives the thread's database connection back to the process's pool: a run holds no
  connection across a call (invariant 21), so a process advancing hundreds of runs needs a pool's
  worth of connections, not one per run (the heartbeat keeps one of them while the process holds runs);
- during the call, the process's one heartbeat thread looks at every lease of the process that a call
  is waiting under, at least every WATCH_SECONDS, in one statement for all of them (RunStore.renew_many):
  it renews those due (every lease/3), fenced like every other write (token, RUNNING), and finds those
  lost (another worker took the run, or an operator cancelled it);
- the call runs on a call thread (`Heartbeat.call`) while the step's thread waits for its answer or for
  the lease's loss, whichever comes first: a run cancelled mid-call frees its worker slot within about
  WATCH_SECONDS, `LeaseLost` raised on the step's thread. The abandoned call ends on its own thread and
  its outcome is dropped; a side effect it was sending stays STARTED in the ledger, for the reconciler,
  as after a crash. Calls are still numbered on the step's thread, before they leave.

Between calls, for as long as the worker holds the run, `kept_alive` renews the lease when
nothing else did within a third of it (a long step, a slow checkpoint write), so the lease can be
short (DURABLE_LEASE_SECONDS, 10 s by default) and a killed worker's runs are taken over seconds
after it died (docs/operations.md). A run that ends within a third of its lease, as most tasks
do, pays nothing: no statement, no thread woken (registering is a dict update), no call thread.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import DatabaseError, connection, connections

from durable.conf import durable_settings
from durable.engine.errors import LeaseLost
from durable.fleet import pool_size
from durable.runtime import pausing
from durable.store import Lease, RunStore

log = logging.getLogger("durable.heartbeat")  # the name operators filter on, kept across the move to runtime/

BEATS_PER_LEASE = 3  # a renewal may fail twice and the lease still holds until the third
MARGIN_SECONDS = 1.0  # kept beyond a call's timeout: a slow commit, the sweeper's clock
IDLE_WAKE_SECONDS = 1.0  # how often the idle thread looks for beats falling due (no wake-up per claim)
WATCH_SECONDS = 1.0  # how often the leases of calls in flight are looked at: a cancelled call's slot frees this soon
BEFORE_CALL_SECONDS = 1.0  # what step writes keep beyond a call's need: the step's own code before its next call
CALL_THREAD_IDLE_SECONDS = 60.0  # a call thread left with nothing to do for this long ends

T = TypeVar("T")


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
        self.look_at = float("inf")  # a call's: when the heartbeat next looks whether its lease still holds
        self.renewals = 0
        self.context = contextvars.copy_context()  # its log lines carry the run, step and operation ids
        self.loss: Future[None] = Future()  # done once the lease is found lost: what a call in flight waits on too
        self._woken: threading.Event | None = None  # the call in flight's (call()), woken by lose() too
        self._keeping = False

    @property
    def lost(self) -> bool:
        """A renewal found the lease taken by another worker (or the run moved on without us)."""
        return self.loss.done()

    @property
    def running(self) -> bool:
        return _heart.beating(self)

    def start(self) -> Heartbeat:
        self.due = time.monotonic() + self.interval
        if not self.when_stale:  # a call: its lease is looked at every WATCH_SECONDS while it is out
            self.look_at = time.monotonic() + WATCH_SECONDS
        self._keeping = True
        _heart.add(self)
        return self

    def stop(self) -> None:
        _heart.remove(self)

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` on a call thread, waited for until it answers or the lease is lost (then
        LeaseLost at once: the call is abandoned, its outcome dropped). Outside a kept lease (a caller's
        transaction), on this thread."""
        if not self._keeping:
            return fn(*args, **kwargs)
        woken = self._woken = threading.Event()  # set by the call's end or by lose(), whichever comes first
        if self.lost:  # found lost since the call was numbered (looked at after _woken is set: lose() sets it then)
            raise LeaseLost(f"run {self.lease.run_id}: lease token {self.lease.token} no longer holds")
        future: Future[T] = _call_threads().submit(woken, contextvars.copy_context().run, _on_call_thread, fn, args,
                                                   kwargs)
        woken.wait()  # one Event, where concurrent.futures.wait() on two futures cost a waiter and four locks a call
        if not future.done():
            raise LeaseLost(f"run {self.lease.run_id}: lease token {self.lease.token} was taken while a call was "
                            "in flight; the call is abandoned")
        return future.result()

    @property
    def next_at(self) -> float:
        """When the heartbeat must next look at this one: to renew it, or (a call's) to see that it still holds."""
        return min(self.due, self.look_at)

    def renews_now(self, now: float) -> bool:
        """Whether this round renews the lease: it is due, and (between calls) nothing else renewed it lately."""
        return self.due <= now and self._stale(now)

    def _stale(self, now: float) -> bool:
        """A call's heartbeat renews at every beat; between calls, only a lease nothing renewed for an interval."""
        since = now - self.lease.renewed_at
        if self.when_stale and since < self.interval * 0.9:
            self.due = now + self.interval - since
            return False
        return True

    def renewed(self, now: float) -> None:
        self.renewals += 1
        self.due = now + self.interval

    def lose(self) -> None:
        with contextlib.suppress(InvalidStateError):  # found lost twice (by hand and by the thread): once is enough
            self.loss.set_result(None)
        woken = self._woken  # read after loss is set: a call() registering later sees `lost` and does not wait
        if woken is not None:
            woken.set()
        if self.when_stale:  # between calls: the worker's next write finds it and stops (unless it just ended)
            log.info("lease no longer held by this worker; its next write will stop the run's task")
        else:
            log.warning("lease lost while a call was in flight: its outcome will be abandoned")

    def beat(self) -> bool:
        """Renew once, by itself; False when the lease is lost and there is nothing more to renew."""
        if not self._stale(time.monotonic()):
            return True
        try:
            self.db.renew(self.lease)
        except LeaseLost:
            self.context.run(self.lose)
            return False
        except DatabaseError:  # the next beat tries again; the lease left still covers the call
            log.warning("could not renew the lease; trying again in %.1fs", self.interval, exc_info=True)
            connection.close()
            self.due = time.monotonic() + self.interval
            return True
        self.renewed(time.monotonic())
        return True


def _on_call_thread(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    """A call on a call thread: any database connection it took goes back when it ends (connections are per thread)."""
    try:
        return fn(*args, **kwargs)
    finally:
        connections.close_all()


class _CallThreads:
    """The threads a process makes its calls on: made as calls need them, kept CALL_THREAD_IDLE_SECONDS for the
    next. Daemon threads, unlike a ThreadPoolExecutor's: a call a cancel abandoned never holds up the worker's
    shutdown, which waits for its tasks, not for what they gave up on."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Future[Any], threading.Event, Callable[..., Any], tuple[Any, ...]]] = (
            queue.SimpleQueue())
        self._idle = 0  # threads that will take the next call without being asked
        self._lock = threading.Lock()

    def submit(self, done: threading.Event, fn: Callable[..., T], *args: Any) -> Future[T]:
        """`fn(*args)` on a call thread; `done` is set once its future holds the outcome."""
        future: Future[T] = Future()
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._work.put((future, done, fn, args))
        if spawn:
            threading.Thread(target=self._serve, name="durable-call", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            try:
                future, done, fn, args = self._work.get(timeout=CALL_THREAD_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # another idle thread takes what comes: this one may end
                        self._idle -= 1
                        return
                continue  # a call was handed to this thread just now: serve it
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
                    future.set_exception(exc)
            done.set()
            with self._lock:
                self._idle += 1


_calls: tuple[int, _CallThreads] | None = None
_calls_lock = threading.Lock()


def _call_threads() -> _CallThreads:
    """The process's call threads: a forked pool child makes its own (threads do not survive a fork)."""
    global _calls
    calls = _calls
    if calls is None or calls[0] != os.getpid():
        with _calls_lock:
            if _calls is None or _calls[0] != os.getpid():
                _calls = (os.getpid(), _CallThreads())
            calls = _calls
    return calls[1]


def pooled() -> bool:
    """This process's connections come from a pool (Django's OPTIONS["pool"], Postgres)."""
    return pool_size() > 0


def give_back_connection() -> None:
    """Return the thread's connection to the pool (outside a transaction): nothing is held across a call."""
    if pooled() and not connection.in_atomic_block:
        connection.close()


class _Heart:
    """The one thread per process that renews the leases of the runs it holds and watches those of its calls.

    Starting a thread per call would cost each call a thread handoff (about a millisecond on a
    busy machine); registering with this one is a dict update. It sleeps while nothing is due and
    no call is in flight. While the process holds runs it keeps one connection of the pool: a renewal
    that queued behind hundreds of runs' writes for a connection could come after the lease ran out.
    Once it holds none, it gives the connection back (Django's connections are per thread).
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
            if beat.next_at < self._wake_at:  # else the thread finds it at its next look, in time
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
                wake_at = min(beat.next_at for beat in self._beats.values())
                if wake_at > now:
                    self._wait_until(min(wake_at, now + IDLE_WAKE_SECONDS), now)
                    continue
                # Every call's lease is looked at, with those due within the next look: one statement for all.
                beats = [beat for beat in self._beats.values()
                         if not beat.when_stale or beat.due <= now + WATCH_SECONDS]
            self._round(beats, now)
            for beat in beats:
                if not beat.when_stale:
                    beat.look_at = now + WATCH_SECONDS

    def _round(self, beats: list[Heartbeat], now: float) -> None:
        """One statement per store for every lease looked at: those due renewed, those no longer held lost."""
        by_store: dict[int, tuple[RunStore, dict[int, tuple[Lease, bool]]]] = {}
        for beat in beats:
            # Due within the next look: renewed now, with the others (at most WATCH_SECONDS early).
            renew = beat.renews_now(now + WATCH_SECONDS)
            leases = by_store.setdefault(id(beat.db), (beat.db, {}))[1]
            lease, renewing = leases.get(id(beat.lease), (beat.lease, False))
            leases[id(beat.lease)] = (lease, renewing or renew)
        for db, leases in by_store.values():
            looked = list(leases.values())
            try:
                held = db.renew_many(looked)
            except DatabaseError:  # the next round tries again; the lease left still covers the call
                log.warning("could not renew %d lease(s); trying again in %.1fs", len(looked), WATCH_SECONDS,
                            exc_info=True)
                connection.close()
                for beat in beats:  # those due are tried again at the next look, not at once
                    if beat.due <= now + WATCH_SECONDS:
                        beat.due = now + WATCH_SECONDS
                continue
            self._settle([beat for beat in beats if beat.db is db], leases, looked, held, now)

    def _settle(self, beats: list[Heartbeat], leases: dict[int, tuple[Lease, bool]],
                looked: list[tuple[Lease, bool]], held: list[bool], now: float) -> None:
        still = {id(lease): (holds, renewing) for (lease, renewing), holds in zip(looked, held, strict=True)}
        for beat in beats:
            holds, renewing = still[id(beat.lease)]
            if not beat.running:  # stopped meanwhile: the run ended (released, finished) or the call returned
                continue
            if not holds:
                beat.context.run(beat.lose)
                self.remove(beat)
            elif renewing and beat.due <= now + WATCH_SECONDS:
                beat.renewed(now)

    def _wait_until(self, wake_at: float, now: float) -> None:
        # Called holding the condition: add() compares a new beat's next look with _wake_at.
        self._wake_at = wake_at
        self._changed.wait(wake_at - now)
        self._wake_at = 0.0  # awake: add() need not notify


_heart = _Heart()


def _needed(timeout: float) -> float:
    """What a call with this timeout needs left of the lease to leave: its timeout and a margin."""
    return timeout + MARGIN_SECONDS


@contextmanager
def kept_alive(db: RunStore, lease: Lease) -> Iterator[None]:
    """Renew the lease while the worker holds the run, whenever nothing else did for a third of it; and have the
    step writes keep what a call needs left of it, plus the time a step may take before its call."""
    lease.keep_left = _needed(durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS) + BEFORE_CALL_SECONDS
    if connection.in_atomic_block:  # as in lease_kept: a renewal from another connection would only wait
        yield
        return
    beat = Heartbeat(db, lease, when_stale=True).start()
    try:
        yield
    finally:
        beat.stop()


@contextmanager
def lease_kept(db: RunStore, lease: Lease, *, timeout: float | None = None) -> Iterator[Heartbeat]:
    """Hold the lease for as long as the call inside takes; raise LeaseLost after it if it was lost.

    Make the call with the heartbeat it gives, `kept.call(fn, ...)`, so a lost lease (a cancel) ends the
    wait at once. `timeout` is how long the call may take (its client's timeout): DURABLE_HTTP_TIMEOUT_SECONDS
    unless given.
    """
    timeout = durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS if timeout is None else timeout
    pausing.before_call(lease)  # a pause asked since a boundary that did not look: PauseSeen, nothing leaves
    pausing.call_made()  # the worker looks for a pause asked meanwhile at the step's end
    db.confirm_writes()  # no call leaves on a lease the last step's write may have found lost
    if lease.seconds_left() < _needed(timeout):
        db.renew(lease)  # never start a call on a lease that may run out before it returns
    if connection.in_atomic_block:
        # The caller holds a transaction open: no other worker sees this claim, and a renewal on
        # another connection would only wait for that transaction's lock. The call runs on this thread.
        yield Heartbeat(db, lease)
        return
    give_back_connection()  # invariant 21: no connection held while the call is out
    beat = Heartbeat(db, lease).start()
    try:
        yield beat
    finally:
        beat.stop()
        if beat.lost:  # replaces whatever the call raised: the fence says nothing of it may be recorded
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} was taken while a call was in flight")
