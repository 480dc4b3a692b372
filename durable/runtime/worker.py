"""What any Celery app that runs durable's tasks needs, the standalone project's or a host's: one call, `configure(app)`.

Importing this module does nothing; a project's own Celery module calls `configure(app)` once.
Then every worker, once ready, records itself (durable/fleet.py) and starts one thread that runs
the sweeper, taking turns with the other workers through the database (one sweep per
DURABLE_SWEEP_SECONDS across all of them), so a killed worker's runs are sent again within
seconds of their lease running out without beat or any other process (docs/operations.md); with
DURABLE_RETENTION_DAYS set, one worker a day also sends the retention pass (durable.prune).
"""
from __future__ import annotations

import gc
import logging
import os
import threading
import time

from celery import Celery
from celery.signals import celeryd_after_setup, task_postrun, task_prerun, worker_process_init, worker_ready

log = logging.getLogger("durable.sweeper")

RETENTION_PERIOD_SECONDS = 86400.0  # one retention pass a day across all workers, when DURABLE_RETENTION_DAYS is set
PRUNE_TASK = "durable.prune"  # durable/tasks.py, sent by name as beat's schedule names it


def configure(app: Celery) -> None:
    """Make `app` fit to advance runs: broker folders for kombu's filesystem transport, connections
    kept between tasks the way Django keeps them between requests, and the sweeper in every worker."""
    app.on_after_configure.connect(_make_broker_folders, weak=False)
    task_prerun.connect(_close_old_database_connections, weak=False, dispatch_uid="durable-close-old-connections-pre")
    task_postrun.connect(_close_old_database_connections, weak=False, dispatch_uid="durable-close-old-connections-post")
    worker_ready.connect(_start_worker_thread, weak=False, dispatch_uid="durable-worker-thread")
    celeryd_after_setup.connect(_count_task_threads, weak=False, dispatch_uid="durable-task-threads")
    worker_process_init.connect(_arm_on_park, weak=False, dispatch_uid="durable-arm-on-park")  # each pool process
    if not _pools_dropped_at_fork:
        os.register_at_fork(after_in_child=_drop_inherited_pools)  # a prefork pool's processes open their own
        _pools_dropped_at_fork.append(True)


_pools_dropped_at_fork: list[bool] = []
_inherited_pools: list[object] = []  # kept, never finalised: closing them would close the parent's connections


def _drop_inherited_pools() -> None:
    """In a forked process (a prefork pool's): forget the parent's connection pools, whose connections share their
    sockets with the parent and whose threads did not survive the fork; the child's first query opens its own."""
    from django.db import connections

    for alias in connections:
        pools = getattr(type(connections[alias]), "_connection_pools", None)  # Django's, per backend class
        if pools:
            _inherited_pools.append(dict(pools))
            pools.clear()


def _arm_on_park(**_: object) -> None:
    from durable.runtime import wakes

    wakes.arm_on_park = True  # this worker wakes the short timers it parks itself, on time


def _start_worker_thread(**_: object) -> None:
    from durable.runtime.forks import guard_forks

    guard_forks()  # the prefork pool's processes are forked from this one while the thread below uses the database
    _arm_on_park()
    _tune_collector()
    threading.Thread(target=_worker_loop, name="durable-sweeper", daemon=True).start()


def _tune_collector() -> None:
    """What the worker loaded to start (Django, the workflows, their libraries) is frozen where the cyclic
    collector never walks it again, and young objects are collected less often: a worker with hundreds of runs in
    flight allocates fast, and each collection walked its whole heap (a tenth of its CPU, docs/scaling.md)."""
    from durable.conf import durable_settings

    threshold = durable_settings.DURABLE_WORKER_GC_THRESHOLD
    if not threshold:
        return
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold, *gc.get_threshold()[1:])


def _worker_loop() -> None:
    """Record this worker, then every DURABLE_SWEEP_SECONDS do this worker's part, until it exits."""
    from durable import fleet
    from durable.conf import durable_settings
    from durable.runtime.forks import between_forks

    with between_forks():
        fleet.record("worker")
    seen_at = time.monotonic()
    while True:
        with between_forks():
            seen_at = worker_period(seen_at)
        time.sleep(durable_settings.DURABLE_SWEEP_SECONDS)


def worker_period(seen_at: float) -> float:
    """One period of a worker's thread: sweep if it is this worker's turn, start the day's retention pass if
    that turn is this worker's, refresh its record when due. Returns when the record was last refreshed."""
    from django.db import DatabaseError, connection

    from durable import fleet
    from durable.conf import durable_settings
    from durable.runtime import dispatch, wakes
    from durable.runtime.executor import worker_id
    from durable.runtime.sweeper import sweep_all, take_turn
    from durable.scope import scoped_to

    period = durable_settings.DURABLE_SWEEP_SECONDS
    try:
        if durable_settings.DURABLE_WORKER_SWEEPS and take_turn(worker_id(), period):
            report = sweep_all()
            if report.enqueued or any(count for _, count in report.settled):
                log.info("swept: %s", report)
            wakes.arm_timers(2 * period)  # timers due before the next sweep fire on time, from this process
        if (durable_settings.DURABLE_WORKER_SWEEPS and durable_settings.DURABLE_RETENTION_DAYS > 0
                and scoped_to() is None and take_turn(worker_id(), RETENTION_PERIOD_SECONDS, scope="retention")):
            # A task, as beat would send it: pruning a large backlog takes minutes, and sweeps must go on.
            dispatch.send_by_name(PRUNE_TASK)
        if time.monotonic() - seen_at >= fleet.PROCESS_BEAT_SECONDS:
            fleet.seen("worker")
            fleet.forget_gone()
            seen_at = time.monotonic()
    except DatabaseError:  # the database away for a moment: the next period tries again
        log.warning("the worker's sweep failed; trying again in %.1fs", period, exc_info=True)
        connection.close()
    except Exception:  # a bug in a sweep hook must not end the thread: every later sweep would be lost
        log.exception("the worker's sweep raised; trying again in %.1fs", period)
    return seen_at


def _make_broker_folders(sender: Celery, **_: object) -> None:
    # kombu's filesystem transport (the embedded default) expects its folders to exist.
    for key in ("data_folder_in", "control_folder"):
        folder = sender.conf.broker_transport_options.get(key)
        if folder:
            os.makedirs(folder, exist_ok=True)


# Whether a task's thread may keep its pooled connection until its next task: there are no more task threads in
# the process than connections in its pool (a solo or prefork worker has one), so keeping it starves no other
# thread, and a task is spared a pool checkout (docs/benchmarks-log.md measured a pool's per-task cost). With
# more threads than connections (the threads pool, hundreds of runs in flight) each task gives its connection back.
_keep_between_tasks: list[bool] = [True]
# The process's own threads that use the pool beside its tasks: the heartbeat (which keeps one while the process
# holds runs), the sweeper and the armed timers. Task threads keeping theirs must leave these enough: with 10 task
# threads on a pool of 10, the heartbeat waited behind them for a connection, leases ran out mid-call and a run was
# taken from its own worker over and over (tests/durable/tools/bench/test_agents.py, on a loaded CI machine).
OWN_THREADS = 3


def _count_task_threads(instance: object = None, **_: object) -> None:
    from durable.fleet import pool_size

    pool_cls = getattr(instance, "pool_cls", None)
    module = pool_cls if isinstance(pool_cls, str) else getattr(pool_cls, "__module__", "")
    threads = int(getattr(instance, "concurrency", 1) or 1) if any(
        name in module for name in ("thread", "gevent", "eventlet")) else 1
    _keep_between_tasks[0] = threads + OWN_THREADS <= pool_size()


def _close_old_database_connections(**_: object) -> None:
    # What Django does at each request's start and end: drop a connection that is broken or older than
    # CONN_MAX_AGE, keep the others. With CELERY_DB_REUSE_MAX set, Celery stops closing them all after
    # every task, which was the largest per-run cost durable_bench --compare measured. From a pool (CONN_MAX_AGE
    # 0) that closes every connection, giving it back: unless a thread may keep its own (above), but for errors.
    from django.db import close_old_connections, connections

    from durable.runtime.heartbeat import pooled

    if pooled() and _keep_between_tasks[0]:
        for db in connections.all(initialized_only=True):
            if db.errors_occurred and not db.in_atomic_block:
                db.close()  # the pool checks it as it comes back, and drops it if broken
        return
    close_old_connections()
