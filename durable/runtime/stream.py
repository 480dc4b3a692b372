"""A run's stream, written: what `ctx.stream` publishes, a row per chunk, and the sweeper's pruning past retention.

A chunk is committed on its own, at once, outside the visit's records: followers see it while the step still runs,
and replay never reads it. The write holds a connection only for the INSERT (and its NOTIFY; invariant 21). It is
not fenced on the lease: a worker that lost its lease may still publish what it was writing, as a step run again
after a crash publishes again (the stream is not the journal; docs/workflows.md, "Streaming"). Under the `notify`
transport a NOTIFY on the stream's channel with the run's id follows the INSERT's commit, so a web process woken by
it reads the chunk (durable/api/followers.py).
"""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.db import connection
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.streams import CHANNEL, NOTIFY, checked_data, kind_of, transport_of
from durable.models import StreamChunk
from durable.runtime.heartbeat import give_back_connection
from durable.runtime.visit import Visit

PRUNE_BATCH = 10_000  # chunks deleted per statement: a long backlog is deleted over several beats


# One run's chunks must commit in id order, or a follower reading `id > last` could pass one that commits late:
# threads of one visit (ctx.parallel's calls, an agent's requests) publish one at a time, id drawn and committed
# under the run's stripe. Runs on different stripes publish at once.
_stripes = [threading.Lock() for _ in range(64)]


def publish(visit: Visit, data: Any, kind: str | None = None) -> int:
    """Publish `data` on the run's stream from any thread of the visit; returns the chunk's id."""
    kind, data = kind_of(data, kind), checked_data(data)
    # The connection first, then the stripe: a thread holding the stripe never waits for the pool, where the
    # threads waiting for the stripe might hold every connection.
    connection.ensure_connection()
    with _stripes[visit.run_id.int % len(_stripes)]:
        chunk_id = StreamChunk.objects.create(run_id=visit.run_id, step=visit.step, visit=visit.visit,
                                              attempt=visit.attempt, kind=kind, data=data,
                                              published_at=timezone.now()).id
    if transport_of(durable_settings.DURABLE_STREAM_TRANSPORT, connection.vendor) == NOTIFY:
        notify(visit.run_id)
    give_back_connection()  # from a pool, returned at once: a streaming step holds none between chunks
    return chunk_id


def notify(run_id: UUID) -> None:
    """Tell the web processes that `run_id` published, once its chunk committed. Postgres serializes the commits of
    transactions that NOTIFY (one lock for the database's queue, held through the commit); this one writes nothing
    else and does not wait for its commit to reach the disk, so it holds that lock for microseconds, while the chunk's
    own INSERT committed as any write. A notification lost in a crash costs a follower one FALLBACK_SECONDS."""
    with connection.cursor() as cursor:
        if connection.in_atomic_block:  # inside the caller's transaction (a test's): sent when it commits
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(run_id)])
            return
        # One round trip; the run id is a UUID's text and the channel a constant: nothing to escape.
        cursor.execute(f"BEGIN; SET LOCAL synchronous_commit TO off; SELECT pg_notify('{CHANNEL}', '{run_id}'); "
                       "COMMIT")


def prune() -> int:
    """Delete chunks older than DURABLE_STREAM_RETENTION_SECONDS (a sweeper task); returns how many."""
    cutoff = timezone.now() - timedelta(seconds=float(durable_settings.DURABLE_STREAM_RETENTION_SECONDS))
    old = StreamChunk.objects.filter(published_at__lt=cutoff).order_by("published_at")[:PRUNE_BATCH]
    deleted, _ = StreamChunk.objects.filter(id__in=list(old.values_list("id", flat=True))).delete()
    return deleted
