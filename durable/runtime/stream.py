"""A run's stream, written: what `ctx.stream` publishes, a row per chunk, and the sweeper's pruning past retention.

A chunk is committed on its own, at once, outside the visit's records: followers see it while the step still runs,
and replay never reads it. The write holds a connection only for the INSERT (invariant 21). It is not fenced on the
lease: a worker that lost its lease may still publish what it was writing, as a step run again after a crash
publishes again (the stream is not the journal; docs/workflows.md, "Streaming"). Under the `notify` transport the
same statement sends NOTIFY on the stream's channel with the run's id: Postgres delivers it only once the INSERT
committed, so a web process woken by it reads the chunk (durable/api/followers.py).
"""
from __future__ import annotations

import json
import threading
from datetime import timedelta
from functools import cache
from typing import Any

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
    notify = transport_of(durable_settings.DURABLE_STREAM_TRANSPORT, connection.vendor) == NOTIFY
    with _stripes[visit.run_id.int % len(_stripes)]:
        if notify:
            with connection.cursor() as cursor:  # one statement, one round trip: the row and its NOTIFY commit together
                cursor.execute(_insert_and_notify(), [
                    visit.run_id, visit.step, visit.visit, visit.attempt, kind,
                    None if data is None else json.dumps(data), timezone.now(), CHANNEL, str(visit.run_id)])
                chunk_id = int(cursor.fetchone()[0])
        else:
            chunk_id = StreamChunk.objects.create(run_id=visit.run_id, step=visit.step, visit=visit.visit,
                                                  attempt=visit.attempt, kind=kind, data=data,
                                                  published_at=timezone.now()).id
    give_back_connection()  # from a pool, returned at once: a streaming step holds none between chunks
    return chunk_id


@cache
def _insert_and_notify() -> str:
    """StreamChunk's INSERT with pg_notify in the same statement (the ORM's create cannot add the call)."""
    meta, quote = StreamChunk._meta, connection.ops.quote_name
    column = {field.name: field.column for field in meta.concrete_fields}
    columns = [quote(column[name]) for name in ("run", "step", "visit", "attempt", "kind", "data", "published_at")]
    return (f"WITH chunk AS (INSERT INTO {quote(meta.db_table)} ({', '.join(columns)}) "
            "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s) RETURNING id) SELECT id, pg_notify(%s, %s) FROM chunk")


def prune() -> int:
    """Delete chunks older than DURABLE_STREAM_RETENTION_SECONDS (a sweeper task); returns how many."""
    cutoff = timezone.now() - timedelta(seconds=float(durable_settings.DURABLE_STREAM_RETENTION_SECONDS))
    old = StreamChunk.objects.filter(published_at__lt=cutoff).order_by("published_at")[:PRUNE_BATCH]
    deleted, _ = StreamChunk.objects.filter(id__in=list(old.values_list("id", flat=True))).delete()
    return deleted
