"""The web process's hub (durable/api/followers.py) under each transport: what a followed run publishes while its
client follows reaches the client once, in order, then the end; under `notify`, also a chunk whose notification
never came (the fallback read covers it). The same with a real worker: tests/durable/runtime/test_stream_worker.py."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from durable import services
from durable.api import followers
from durable.api.followers import hub
from durable.engine.states import RunStatus
from durable.engine.streams import CHANNEL
from durable.models import Run, StreamChunk
from durable.roles import OPERATOR
from durable.runtime import stream
from tests.conftest import user_with_roles
from tests.durable.stream_workflows import NAME, received
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the hub reads on a thread of its own: rows must commit
postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is Postgres'")


def inserted(run_id: UUID, n: int) -> None:
    """A chunk written without a notification: what a lost NOTIFY leaves."""
    StreamChunk.objects.create(run_id=run_id, step="talk", visit=1, attempt=1, kind="text", data=f"part {n}",
                               published_at=timezone.now())


def notified(run_id: UUID, n: int) -> None:
    """A chunk written as `ctx.stream` writes it under `notify`: the INSERT, then its NOTIFY."""
    inserted(run_id, n)
    stream.notify(run_id)


def following(run_id: UUID) -> bool:
    with hub._lock:
        return any(f.run_id == run_id for f in hub._followers)


def follow_while(publish: Callable[[UUID], None], **given: Any) -> list[dict[str, Any]]:
    """Follow a PENDING run from before it publishes: once the hub has the client, another thread calls
    `publish(run_id)` then ends the run; the events the client received."""
    client = Client()
    client.force_login(user_with_roles("olivia", OPERATOR))
    run, _ = services.start_run(workflow=NAME, input=given, business_key="LIVE")
    assert run.status == RunStatus.PENDING  # no worker: the client follows it live

    def publisher() -> None:
        try:
            wait_for(lambda: following(run.id), what="the hub to have the client")
            publish(run.id)
            Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED)  # the end the hub notices
        finally:
            connection.close()

    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        return list(received(client.get(f"/api/runs/{run.id}/stream/", HTTP_ACCEPT="text/event-stream")))
    finally:
        thread.join()


def wait_for_each(publish: Callable[[UUID, int], None], count: int) -> Callable[[UUID], None]:
    def publishing(run_id: UUID) -> None:
        for n in range(count):
            publish(run_id, n)
            time.sleep(0.01)  # chunks apart, as a step writes them, so the hub reads them in several reads

    return publishing


@pytest.mark.parametrize("transport", ["poll", pytest.param("notify", marks=postgres)])
def test_what_a_followed_run_publishes_reaches_its_client_once_in_order_then_the_end(settings, transport):
    settings.DURABLE_STREAM_TRANSPORT = transport
    write = notified if transport == "notify" else inserted
    got = follow_while(wait_for_each(write, 12))
    assert [e["data"]["data"] for e in got[:-1]] == [f"part {n}" for n in range(12)]
    assert [int(e["id"]) for e in got[:-1]] == list(StreamChunk.objects.order_by("id").values_list("id", flat=True))
    assert got[-1] == {"id": None, "event": "end", "data": {"status": "SUCCEEDED", "waiting_for": None}}


@postgres
def test_under_notify_a_chunk_whose_notification_never_came_arrives_by_the_fallback_read(settings):
    settings.DURABLE_STREAM_TRANSPORT = "notify"

    def publish(run_id: UUID) -> None:
        notified(run_id, 0)
        inserted(run_id, 1)  # its NOTIFY lost
        notified(run_id, 2)

    got = follow_while(publish)
    assert [e["data"]["data"] for e in got[:-1]] == ["part 0", "part 1", "part 2"]
    assert got[-1]["event"] == "end"


@postgres
def test_a_connection_the_hub_listened_on_listens_to_nothing_once_it_stops():
    with connection.cursor() as cursor:
        cursor.execute(f"LISTEN {CHANNEL}")
        cursor.execute("SELECT pg_notify(%s, 'x')", [CHANNEL])
        followers._unlisten()
        cursor.execute("SELECT count(*) FROM pg_listening_channels()")
        assert cursor.fetchone()[0] == 0
    assert list(connection.connection.notifies(timeout=0)) == []  # what it had received is dropped too
