"""A run's stream over the API (durable/api/stream.py): what its steps published, in order, as Server-Sent Events,
resumed after Last-Event-ID, ended once the run ended or waits; refused as the run itself is (404, 403, 401), and
its data only under the contents rule. Following a running run with a real worker: tests/durable/runtime/
test_stream_worker.py."""
from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run, StreamChunk
from durable.roles import OPERATOR
from tests.conftest import api_token, make_user, user_with_roles
from tests.durable.claims import advance
from tests.durable.stream_workflows import NAME

pytestmark = pytest.mark.django_db


def start(**given: Any) -> Run:
    run, _ = services.start_run(workflow=NAME, input=given, business_key="CHAT-1")
    return run


def url(run_id: object) -> str:
    return f"/api/runs/{run_id}/stream/"


def events(response: Any) -> list[dict[str, Any]]:
    """The response's SSE events, each as {id, event, data}; comments and the retry line left out."""
    text = b"".join(response.streaming_content).decode()
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":") and ": " in line)
        if "event" in fields:
            found.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
    return found


@pytest.fixture
def follower(db) -> Client:
    client = Client()
    client.force_login(user_with_roles("olivia", OPERATOR))
    return client


def test_a_finished_run_streams_every_chunk_its_steps_published_in_order_then_ends(follower):
    run = advance(start(parts=2))
    assert run.status == RunStatus.SUCCEEDED
    response = follower.get(url(run.id), HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    got = events(response)
    assert [(e["event"], e["data"]["data"]) for e in got[:-1]] == [
        ("text", "part 0 "), ("text", "part 1 "), ("progress", {"said": 2}),
        ("text", "part 2 "), ("text", "part 3 "), ("progress", {"said": 4})]
    assert got[-1] == {"id": None, "event": "end", "data": {"status": "SUCCEEDED", "waiting_for": None}}
    ids = [int(e["id"]) for e in got[:-1]]
    assert ids == sorted(ids) == list(StreamChunk.objects.filter(run=run).values_list("id", flat=True))
    assert [e["data"]["step"] for e in got[:-1]] == ["begin"] * 3 + ["go_on"] * 3


def test_last_event_id_resumes_after_that_chunk_and_sends_nothing_twice(follower):
    run = advance(start(parts=2))
    first = events(follower.get(url(run.id)))
    again = events(follower.get(url(run.id), HTTP_LAST_EVENT_ID=first[2]["id"]))
    assert [e["id"] for e in again] == [e["id"] for e in first[3:]]
    by_query = events(follower.get(url(run.id) + f"?last_event_id={first[4]['id']}"))
    assert [e["id"] for e in by_query] == [e["id"] for e in first[5:]]


def test_a_waiting_run_streams_what_it_published_and_ends_saying_what_it_waits_for(follower):
    run = advance(start(parts=1, wait=True))
    assert run.status == RunStatus.WAITING
    got = events(follower.get(url(run.id)))
    assert [e["event"] for e in got] == ["text", "progress", "end"]
    assert got[-1]["data"]["status"] == "WAITING" and got[-1]["data"]["waiting_for"]["kind"] == "event"


def test_without_the_contents_permissions_the_chunks_come_without_their_data(db):
    run = advance(start(parts=1))
    client = Client()
    client.force_login(make_user("viewer", "durable.view_run"))
    got = events(client.get(url(run.id)))
    assert [e["event"] for e in got] == ["text", "progress", "text", "progress", "end"]
    assert all(e["data"]["data"] is None for e in got[:-1])


def test_a_run_that_does_not_exist_is_404_as_the_run_itself(follower):
    response = follower.get(url("00000000-0000-0000-0000-000000000000"), HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 404
    assert follower.get("/api/runs/00000000-0000-0000-0000-000000000000/").status_code == 404


def test_a_caller_without_view_run_is_refused_403_naming_it_and_an_anonymous_one_401(db):
    run = advance(start(parts=1))
    client = Client()
    client.force_login(make_user("stranger"))
    refused = client.get(url(run.id))
    assert refused.status_code == 403 and "durable.view_run" in refused.json()["detail"]
    assert Client().get(url(run.id)).status_code == 401


def test_an_api_token_follows_a_stream(db):
    run = advance(start(parts=1))
    token = api_token(user_with_roles("bot", OPERATOR))
    got = events(Client().get(url(run.id), HTTP_AUTHORIZATION=f"Token {token}"))
    assert got[-1]["event"] == "end"


@pytest.mark.parametrize("given", ["abc", "-1", "1.5", "9" * 30, "١٢"])
def test_a_last_event_id_that_is_not_a_chunk_id_is_400_naming_it(follower, given):
    run = advance(start(parts=1))
    response = follower.get(url(run.id), HTTP_LAST_EVENT_ID=given)
    assert response.status_code == 400
    assert "last_event_id" in response.json()

