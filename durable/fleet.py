"""The processes running against this database (web and worker), and which workflows each has loaded.

Each process writes one row (durable.models.Process) when it starts: a worker when Celery says it
is ready, a web process at its first request served by a real server. Each refreshes its row's
`last_seen` every PROCESS_BEAT_SECONDS (a worker from its sweeper thread, a web process at the
first request after that long). Nothing is written per request or per step. What it serves: an error that a workflow is not registered can say which processes have not
loaded it and which have, so the operator knows what to restart (new workflow modules need every
process restarted, web included).
"""
from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.signals import request_started
from django.db import DatabaseError, connection
from django.utils import timezone

from durable.models import Process
from durable.registry import registry
from durable.store.pooling import pool_size  # re-exported: the fleet's figure, the store's rule

log = logging.getLogger("durable.fleet")

PROCESS_BEAT_SECONDS = 15.0  # how often a worker refreshes last_seen
LIVE_WITHIN = timedelta(seconds=4 * PROCESS_BEAT_SECONDS)  # a worker unseen for longer is taken for gone
FORGET_AFTER = timedelta(days=1)  # rows of processes unseen this long are deleted by the sweeper

STARTED_AT = timezone.now()  # this process's start, as near as the import of the app's modules
_recorded_as: list[str] = []  # the kind this process recorded itself as, once it has


@dataclass(frozen=True)
class ProcessInfo:
    kind: str
    hostname: str
    pid: int
    started_at: datetime

    def __str__(self) -> str:
        return f"{self.hostname}:{self.pid} (started {self.started_at:%Y-%m-%d %H:%M:%S} UTC)"


def this_process(kind: str) -> ProcessInfo:
    return ProcessInfo(kind, socket.gethostname(), os.getpid(), STARTED_AT)


def loaded_workflows() -> list[str]:
    return [f"{wf.name}@{wf.version}" for wf in registry.all()]


def most_connections(kind: str) -> int:
    """The most connections a process of this kind opens: its pool's, and a worker's writer's own
    (durable/store/batched.py)."""
    from durable.store import batched  # the store's package imports nothing of the fleet's

    writer = kind == Process.Kind.WORKER and connection.vendor == "postgresql" and batched.wanted()
    return pool_size() + int(writer)


def live_connections() -> int:
    """What the live processes recorded here may open at once: the sum of their pools (durable.W017)."""
    return sum(Process.objects.filter(last_seen__gte=timezone.now() - LIVE_WITHIN)
               .values_list("db_connections", flat=True))


def record(kind: str) -> None:
    """Write (or rewrite, after a pid is reused) this process's row; a failure is logged, never raised."""
    me, now = this_process(kind), timezone.now()
    _recorded_as[:] = [kind]
    try:
        Process.objects.update_or_create(hostname=me.hostname, pid=me.pid, defaults={
            "kind": kind, "started_at": me.started_at, "last_seen": now, "workflows": loaded_workflows(),
            "db_connections": most_connections(kind)})
    except DatabaseError:  # the database not migrated yet, or away: the process runs all the same
        log.warning("could not record this %s process in durable_process", kind, exc_info=True)


def seen(kind: str) -> None:
    """A worker's beat: refresh last_seen (and write the row again if an operator deleted it)."""
    me = this_process(kind)
    if not Process.objects.filter(hostname=me.hostname, pid=me.pid).update(last_seen=timezone.now()):
        record(kind)


def forget_gone() -> int:
    """Delete the rows of processes unseen for FORGET_AFTER (the sweeper calls it)."""
    deleted, _ = Process.objects.filter(last_seen__lt=timezone.now() - FORGET_AFTER).delete()
    return deleted


def connect_web() -> None:
    """Record a web process at the first request a real server hands it (the test client is not one), and
    refresh its last_seen at most every PROCESS_BEAT_SECONDS after: a clock read per request, no write."""
    request_started.connect(_web_request, dispatch_uid="durable-fleet-web")


_web_seen_at: list[float] = []  # when this web process last wrote its row (monotonic)


def _web_request(sender: Any, environ: dict[str, Any] | None = None, scope: dict[str, Any] | None = None,
                 **_: Any) -> None:
    served = (environ or {}).get("SERVER_SOFTWARE") or ((scope or {}).get("server") or ("testserver",))[0] != "testserver"
    now = time.monotonic()
    if not served or (_web_seen_at and now - _web_seen_at[0] < PROCESS_BEAT_SECONDS):
        return
    first = not _web_seen_at
    _web_seen_at[:] = [now]
    if first:
        record(Process.Kind.WEB)
        return
    try:
        seen(Process.Kind.WEB)
    except DatabaseError:  # never fail a request over it; the next beat tries again
        log.warning("could not refresh this web process's row in durable_process", exc_info=True)


def not_loaded_here(name: str) -> str:
    """Why a workflow this process lacks cannot start here, and what to restart: the live processes that have
    it, and the others that lack it too."""
    kind = _recorded_as[0] if _recorded_as else ""
    me = this_process(kind)
    live = (Process.objects.filter(last_seen__gte=timezone.now() - LIVE_WITHIN)
            .exclude(hostname=me.hostname, pid=me.pid).order_by("kind", "hostname", "pid"))
    having: list[Process] = []
    lacking: list[Process] = []
    for row in live:
        (having if any(entry.split("@")[0] == name for entry in row.workflows) else lacking).append(row)
    here = f"no workflow named {name!r} is registered in this {kind + ' ' if kind else ''}process, {me}"
    if not having:
        return (f"{here}, nor in any process seen in the last {LIVE_WITHIN.seconds} s. Add the module that "
                "registers it to DURABLE_WORKFLOW_MODULES (or an installed app's workflows.py) and restart every "
                "process, web and workers (docs/workflows.md)")
    also = f"; {_named(lacking)} ha{'s' if len(lacking) == 1 else 've'} not loaded it either" if lacking else ""
    return (f"{here}{also}; {_named(having)} ha{'s' if len(having) == 1 else 've'} loaded it. New workflow modules "
            "need every process restarted: restart the processes started before it was deployed (docs/workflows.md)")


def _named(rows: list[Process], most: int = 5) -> str:
    names = ", ".join(f"{row.kind} {row.hostname}:{row.pid}" for row in rows[:most])
    return names + (f" and {len(rows) - most} more" if len(rows) > most else "")
