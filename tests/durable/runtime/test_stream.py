"""What `ctx.stream` writes (durable/runtime/stream.py): a chunk per call, stamped with the visit that published
it, outside the run's records (replay never reads it, a re-executed step publishes again); refused without retry
when it is not JSON; deleted by the sweeper once past DURABLE_STREAM_RETENTION_SECONDS."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.engine.streams import CHANNEL
from durable.models import JournalEntry, Run, StreamChunk
from durable.runtime import stream
from durable.runtime.sweeper import sweep_all
from tests.durable.claims import advance
from tests.durable.stream_workflows import NAME

pytestmark = pytest.mark.django_db


def streamed(**given: object) -> Run:
    run, _ = services.start_run(workflow=NAME, input=given, business_key="CHAT-2")
    return advance(run)


def test_each_call_is_a_chunk_of_its_visit_and_none_is_a_journal_record():
    run = streamed(parts=2)
    chunks = list(StreamChunk.objects.filter(run=run).values_list("step", "kind", "data"))
    assert chunks == [("begin", "text", "part 0 "), ("begin", "text", "part 1 "), ("begin", "progress", {"said": 2}),
                      ("go_on", "text", "part 2 "), ("go_on", "text", "part 3 "), ("go_on", "progress", {"said": 4})]
    assert not JournalEntry.objects.filter(run=run, name__icontains="stream").exists()


def test_chunks_past_retention_are_deleted_by_the_sweeper_and_newer_ones_kept(settings):
    settings.DURABLE_STREAM_RETENTION_SECONDS = 60
    run = streamed(parts=1)
    old = StreamChunk.objects.filter(run=run).order_by("id")[:2]
    StreamChunk.objects.filter(id__in=list(old.values_list("id", flat=True))).update(
        published_at=timezone.now() - timedelta(seconds=61))
    report = sweep_all()
    assert "deleted 2 stream chunk(s) past retention" in str(report)
    assert StreamChunk.objects.filter(run=run).count() == 2
    assert stream.prune() == 0


def test_a_chunk_under_a_kind_that_is_no_event_name_fails_the_run_without_retry_saying_why():
    run = streamed(parts=1, kind="end")
    assert run.status == RunStatus.FAILED
    assert "not a stream event name" in str(run.error)
    assert not StreamChunk.objects.filter(run=run).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="LISTEN/NOTIFY is Postgres'")
@pytest.mark.parametrize("transport", ["notify", "auto", "poll"])
@pytest.mark.django_db(transaction=True)  # a NOTIFY is delivered once its transaction commits
def test_under_notify_each_chunk_notifies_the_channel_with_its_run_id_and_otherwise_none(settings, transport):
    settings.DURABLE_STREAM_TRANSPORT = transport
    listener = connections.create_connection("default")
    try:
        with listener.cursor() as cursor:
            cursor.execute(f"LISTEN {CHANNEL}")
        run = streamed(parts=2)
        heard = [(n.channel, n.payload) for n in listener.connection.notifies(timeout=0.5)]
        chunks = StreamChunk.objects.filter(run=run).count()
        assert heard == ([(CHANNEL, str(run.id))] * chunks if transport == "notify" else [])
        assert list(StreamChunk.objects.filter(run=run).values_list("data", flat=True))[:2] == ["part 0 ", "part 1 "]
    finally:
        with listener.cursor() as cursor:
            cursor.execute("UNLISTEN *")
        listener.close()
