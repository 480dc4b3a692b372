"""A run's stream, the rules (durable/engine/streams.py): a chunk's event name and what it may hold, its SSE frame,
the Last-Event-ID a client resumes from, and which statuses a follower keeps following."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable.engine.errors import NonRetryableError
from durable.engine.states import RunStatus
from durable.engine.streams import (
    MAX_CHUNK_BYTES,
    NOTIFY,
    POLL,
    Chunk,
    checked_data,
    end_frame,
    follows,
    frame,
    kind_of,
    last_event_id,
    transport_of,
)


def test_a_string_is_text_anything_else_data_unless_the_author_names_the_kind():
    assert kind_of("Hel", None) == "text"
    assert kind_of({"done": 3, "of": 10}, None) == "data"
    assert kind_of({"done": 3}, "progress") == "progress"


@pytest.mark.parametrize("kind", ["", "End".lower(), "Progress", "two words", "x" * 41, "9lives", "a\nid: 1"])
def test_a_kind_that_is_not_an_event_name_is_refused_without_retry(kind):
    with pytest.raises(NonRetryableError, match="stream event name"):
        kind_of("x", kind)


def test_data_must_be_json_and_at_most_the_chunk_limit():
    assert checked_data({"tokens": ["a", "b"]}) == {"tokens": ["a", "b"]}
    with pytest.raises(NonRetryableError, match="takes JSON"):
        checked_data({1, 2})
    with pytest.raises(NonRetryableError, match="takes JSON"):
        checked_data(float("nan"))
    with pytest.raises(NonRetryableError, match="smaller pieces"):
        checked_data("x" * MAX_CHUNK_BYTES)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                    max_leaves=10))
def test_any_json_chunk_is_one_event_whose_data_reads_back_as_published(data):
    sent = frame(Chunk(7, "data", "answer", 2, 1, data, "2026-12-07T12:00:00+00:00")).decode()
    assert sent.endswith("\n\n") and sent.count("\n\n") == 1  # newlines in the data are escaped by JSON
    lines = sent.strip("\n").split("\n")
    assert lines[:2] == ["id: 7", "event: data"]
    assert json.loads(lines[2].removeprefix("data: ")) == {"step": "answer", "visit": 2, "attempt": 1, "data": data,
                                                            "published_at": "2026-12-07T12:00:00+00:00"}


def test_the_end_event_carries_no_id_so_a_client_resumes_from_its_last_chunk():
    assert end_frame("WAITING", {"kind": "event"}) == \
        b'event: end\ndata: {"status": "WAITING", "waiting_for": {"kind": "event"}}\n\n'


def test_last_event_id_is_the_header_or_else_the_parameter_and_a_whole_number():
    assert last_event_id(None, None) is None
    assert last_event_id("", "") is None
    assert last_event_id("42", "7") == 42
    assert last_event_id(None, "7") == 7
    for bad in ("x", "-1", "1e3", "٣", "9" * 20):
        with pytest.raises(ValueError, match="Last-Event-ID"):
            last_event_id(bad, None)


def test_a_follower_follows_a_run_queued_or_running_and_stops_once_it_waits_or_ended():
    assert {status for status in RunStatus if follows(status)} == {RunStatus.PENDING, RunStatus.RUNNING}
    assert not follows("")  # a run gone


def test_the_transport_is_notify_only_when_asked_for_on_postgres_else_poll():
    assert transport_of("notify", "postgresql") == NOTIFY
    assert transport_of("auto", "postgresql") == transport_of("poll", "postgresql") == POLL
    assert {transport_of(setting, "sqlite") for setting in ("auto", "poll", "notify")} == {POLL}
