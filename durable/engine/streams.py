"""A run's stream, the rules without Django: what a chunk may be, how it is framed as Server-Sent Events, when a
follower's stream ends, and which transport wakes its followers.

The stream is not the journal: what a step publishes goes to the run's followers and a retention window, never to
replay. A step run again after a crash publishes again; followers see both (docs/workflows.md, "Streaming").
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from durable.engine.errors import NonRetryableError
from durable.engine.states import RunStatus

MAX_CHUNK_BYTES = 64 * 1024  # one chunk's JSON: a token delta is a few bytes, a progress report a few hundred
KIND = re.compile(r"[a-z][a-z0-9_.-]{0,39}")
END = "end"  # the last event of a follower's stream: the run ended or waits
# A follower's stream stays open while the run may still publish without anyone acting: queued or running.
FOLLOWED = frozenset({RunStatus.PENDING, RunStatus.RUNNING})


def kind_of(data: Any, kind: str | None) -> str:
    """The chunk's event name: the author's, or `text` for a string and `data` for anything else."""
    if kind is None:
        return "text" if isinstance(data, str) else "data"
    if not KIND.fullmatch(kind) or kind == END:
        raise NonRetryableError(f"ctx.stream kind {kind!r} is not a stream event name: 1 to 40 of a-z, 0-9, "
                                f"'_', '.', '-', starting with a letter, and not {END!r}", kind="invalid_request")
    return kind


def checked_data(data: Any) -> Any:
    """`data` as it will be stored and sent: JSON, at most MAX_CHUNK_BYTES, or a refusal naming why."""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise NonRetryableError(f"ctx.stream takes JSON (a string, a number, a list, a dict): {exc}",
                                kind="invalid_request") from exc
    if len(text.encode()) > MAX_CHUNK_BYTES:
        raise NonRetryableError(f"ctx.stream chunk of {len(text.encode())} bytes is over {MAX_CHUNK_BYTES}: publish "
                                "it in smaller pieces", kind="invalid_request")
    return data


# How a web process learns that chunks were published (docs/operations.md, "Streams"): it reads them every
# DURABLE_STREAM_POLL_SECONDS, or when a Postgres NOTIFY sent by the chunk's INSERT says which run published.
POLL, NOTIFY, AUTO = "poll", "notify", "auto"
TRANSPORTS = (AUTO, POLL, NOTIFY)
CHANNEL = "durable_stream"  # the NOTIFY channel; the payload is the run's id


def transport_of(setting: str, vendor: str) -> str:
    """The transport DURABLE_STREAM_TRANSPORT names on this database: NOTIFY when asked for on Postgres, else POLL
    (`auto`, as measured best for dense streams: docs/operations.md, "Streams"; SQLite has no LISTEN)."""
    return NOTIFY if setting == NOTIFY and vendor == "postgresql" else POLL


def follows(status: str) -> bool:
    """Whether a follower of a run in `status` waits for more: no once it has ended or waits."""
    return status in FOLLOWED


@dataclass(frozen=True)
class Chunk:
    """One published chunk as a follower receives it."""

    id: int
    kind: str
    step: str
    visit: int
    attempt: int
    data: Any
    published_at: str  # ISO 8601


def frame(chunk: Chunk) -> bytes:
    """The chunk as one SSE event: its id (what Last-Event-ID sends back), its kind as the event name, JSON data."""
    body = {"step": chunk.step, "visit": chunk.visit, "attempt": chunk.attempt, "data": chunk.data,
            "published_at": chunk.published_at}
    return f"id: {chunk.id}\nevent: {chunk.kind}\ndata: {json.dumps(body)}\n\n".encode()


def end_frame(status: str, waiting_for: Any) -> bytes:
    """The stream's last event: the run's status and what it waits for. It carries no id: a client resuming later
    sends the last chunk's."""
    return f"event: {END}\ndata: {json.dumps({'status': status, 'waiting_for': waiting_for})}\n\n".encode()


def retry_frame(milliseconds: int) -> bytes:
    """How long an EventSource waits before it reconnects, sent first."""
    return f"retry: {milliseconds}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"  # a comment: keeps proxies from closing an idle stream, ignored by clients


def last_event_id(header: str | None, query: str | None) -> int | None:
    """The chunk id a client resumes after (the Last-Event-ID header, or `?last_event_id=` for a first
    connection); None for the start of the retained stream. ValueError when given and not a chunk id."""
    given = header if header not in (None, "") else query
    if given in (None, ""):
        return None
    assert given is not None
    if not given.isascii() or not given.isdigit() or len(given) > 19:
        raise ValueError("Last-Event-ID must be the id of a stream event this endpoint sent (a whole number)")
    return int(given)
