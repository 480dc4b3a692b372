"""`GET /api/runs/{id}/stream/`: a run's stream as Server-Sent Events, resumable with Last-Event-ID.

The response first sends what the run published after the client's Last-Event-ID (all that is retained when it
sends none), read on the request's thread; then, while the run is PENDING or RUNNING, what it publishes as the
process's hub hands it over (durable/api/followers.py), with a keep-alive comment when idle; and ends with an `end`
event once the run ended or waits, or after DURABLE_STREAM_MAX_SECONDS (then a client reconnects with its
Last-Event-ID and misses nothing retained). It holds a web server thread throughout, and a database connection
only while it reads the backlog (docs/operations.md, "Streams").
"""
from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Q
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from durable.api.errors import LabelledErrors
from durable.api.followers import BATCH, Ended, Follower, hub, read_chunks
from durable.api.permissions import ActionPermission
from durable.conf import durable_settings
from durable.engine.streams import KEEPALIVE, Chunk, end_frame, follows, frame, last_event_id, retry_frame
from durable.models import Run
from durable.permissions import can_see_contents

RECONNECT_MILLISECONDS = 1000
DESCRIPTION = """The run's stream as Server-Sent Events (`text/event-stream`): what its steps publish with
`ctx.stream`, each chunk an event named by its kind (`text`, `progress`, `data`, or the author's) with the chunk's
id and JSON data `{step, visit, attempt, data, published_at}`. It starts after `Last-Event-ID` (the header an
EventSource sends when it reconnects, or the `last_event_id` parameter), or with everything retained
(DURABLE_STREAM_RETENTION_SECONDS), follows the run while it is PENDING or RUNNING, and ends with an `end` event
`{status, waiting_for}` once it ended or waits. A response lasts at most DURABLE_STREAM_MAX_SECONDS: reconnect with
the last id. The stream is not the journal: a step run again after a crash publishes again. `data` is null for a
caller without the contents permissions (view_checkpoint, view_journalentry, view_sideeffect)."""


EVENT = {"type": "object", "properties": {  # one event as an SSE parser gives it: its fields as text
    "event": {"type": "string", "description": "the chunk's kind (text, progress, data, the author's), or end"},
    "id": {"type": "string", "description": "the chunk's id: what Last-Event-ID sends back (none on end)"},
    "data": {"type": "string", "description": "JSON: {step, visit, attempt, data, published_at}; on end, "
                                              "{status, waiting_for}"},
    "retry": {"type": "integer", "description": "milliseconds before a reconnect, sent first"}}}


class EventStreamRenderer(BaseRenderer):
    """What an EventSource accepts; an error (a 404, a 403) is still its JSON body."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: Mapping[str, Any] | None = None) -> bytes:
        return json.dumps(data).encode()


class StreamPermission(ActionPermission):
    permissions = {"stream": "durable.view_run"}


class RunStreamView(LabelledErrors, APIView):
    permission_classes = [StreamPermission]
    renderer_classes = [JSONRenderer, EventStreamRenderer]
    action = "stream"

    @extend_schema(operation_id="runs_stream", description=DESCRIPTION, parameters=[
        OpenApiParameter("Last-Event-ID", str, OpenApiParameter.HEADER, description="resume after this chunk id"),
        OpenApiParameter("last_event_id", int, description="resume after this chunk id (the header wins)")],
        responses={(200, "text/event-stream"): OpenApiResponse(EVENT, description="one Server-Sent Event"),
                   400: OpenApiResponse(description="`last_event_id` is not a chunk id"),
                   404: OpenApiResponse(description="no such run")})
    def get(self, request: Request, pk: UUID) -> StreamingHttpResponse:
        run = get_object_or_404(Run, id=pk)  # 404 for a run the caller cannot see, as GET /api/runs/{id}/ says
        try:
            after = last_event_id(request.headers.get("Last-Event-ID"), request.query_params.get("last_event_id"))
        except ValueError as exc:
            raise ValidationError({"last_event_id": [str(exc)]}) from exc
        events = follow(run.id, after or 0, contents=can_see_contents(request.user))
        response = StreamingHttpResponse(events, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
        return response


def follow(run_id: UUID, after: int, *, contents: bool) -> Iterator[bytes]:
    """The stream's bytes: the backlog after `after`, then what the hub hands over, then the end."""
    yield retry_frame(RECONNECT_MILLISECONDS)
    status, waiting_for = Run.objects.filter(id=run_id).values_list("status", "waiting_for").get()
    while True:  # the backlog, read here: statuses before chunks, as the hub reads them
        backlog = [chunk for _, chunk in read_chunks(Q(run_id=run_id, id__gt=after))]
        yield from (frame(_shown(chunk, contents)) for chunk in backlog)
        after = backlog[-1].id if backlog else after
        if len(backlog) < BATCH:
            break
    if not follows(status):
        yield end_frame(status, waiting_for)
        return
    if not connection.in_atomic_block:
        connection.close()  # waiting holds no connection: the hub reads for every follower
    follower = hub.follow(run_id, after)
    try:
        yield from _handed_over(follower, contents)
    finally:
        hub.leave(follower)


def _handed_over(follower: Follower, contents: bool) -> Iterator[bytes]:
    deadline = time.monotonic() + float(durable_settings.DURABLE_STREAM_MAX_SECONDS)
    keepalive = float(durable_settings.DURABLE_STREAM_KEEPALIVE_SECONDS)
    while (left := deadline - time.monotonic()) > 0:
        try:
            handed = follower.inbox.get(timeout=min(keepalive, left))
        except queue.Empty:
            yield KEEPALIVE  # a client gone is noticed here: the write fails and the server closes the response
            continue
        if isinstance(handed, Ended):
            yield end_frame(handed.status, handed.waiting_for)
            return
        yield from (frame(_shown(chunk, contents)) for chunk in handed)


def _shown(chunk: Chunk, contents: bool) -> Chunk:
    """The chunk as this caller may see it: its data only under the contents rule."""
    return chunk if contents else replace(chunk, data=None)
