"""Following a run's stream while a real worker runs it (issue 39, "Proof"): a client that disconnects mid-stream
and reconnects with Last-Event-ID, across the run's wait for an event and its end, receives every chunk the run
published, once each, in order; under each transport (DURABLE_STREAM_TRANSPORT: poll, and notify on Postgres)."""
from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test import Client, override_settings

from durable import send_event, services
from durable.engine.states import RunStatus
from durable.models import StreamChunk
from durable.roles import OPERATOR
from durable.runtime.dispatch import drop_queue
from durable.tools.processes import WorkerProcess
from tests.conftest import user_with_roles
from tests.durable.stream_workflows import NAME, received
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["poll", pytest.param("notify", marks=pytest.mark.skipif(
    connection.vendor != "postgresql", reason="LISTEN/NOTIFY is Postgres'"))])
def worker(request, worker_log_dir, settings):
    """A worker publishing under each transport, this process's hub following under the same."""
    settings.CELERY_TASK_DEFAULT_QUEUE = queue = f"durable-test-stream-{uuid.uuid4().hex[:8]}"
    settings.DURABLE_STREAM_TRANSPORT = request.param
    process = WorkerProcess(log_path=worker_log_dir / "stream.log", name="stream",
                            env={"DURABLE_STREAM_TRANSPORT": request.param}).start()
    yield process
    process.stop()
    with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        drop_queue(queue)


def test_a_client_that_disconnects_and_reconnects_with_last_event_id_misses_nothing(worker):
    client = Client()
    client.force_login(user_with_roles("olivia", OPERATOR))
    run, _ = services.start_run(workflow=NAME, input={"parts": 15, "pause": 0.05, "wait": True}, business_key="CHAT")
    url = f"/api/runs/{run.id}/stream/"

    first = client.get(url, HTTP_ACCEPT="text/event-stream")
    events = received(first)
    got = [next(events) for _ in range(5)]  # five chunks as the worker publishes them, then the client goes away
    first.close()
    wait_for(lambda: StreamChunk.objects.filter(run=run).count() >= 12, what="the run to publish more meanwhile")

    got += received(client.get(url, HTTP_LAST_EVENT_ID=got[-1]["id"]))  # until the run waits for "more"
    assert got[-1]["event"] == "end" and got[-1]["data"]["status"] == RunStatus.WAITING
    ended_waiting = got.pop()
    send_event(run_id=run.id, name="more", payload=None)
    got += received(client.get(url, HTTP_LAST_EVENT_ID=got[-1]["id"]))  # until the run ends
    assert got[-1]["data"]["status"] == RunStatus.SUCCEEDED == status_of(run.id)

    chunks = got[:-1]
    assert [int(e["id"]) for e in chunks] == list(StreamChunk.objects.filter(run=run).values_list("id", flat=True))
    assert [e["data"]["data"] for e in chunks if e["event"] == "text"] == [f"part {n} " for n in range(30)]
    assert [e["data"]["data"] for e in chunks if e["event"] == "progress"] == [{"said": 15}, {"said": 30}]
    assert ended_waiting["data"]["waiting_for"]["kind"] == "event"
