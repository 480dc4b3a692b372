"""Workflows for the stream tests: a step that publishes as it works, optionally a wait for an event, and a step
that publishes more. Registered in the test process and in worker processes. And how a test's client reads a
stream's events as they come (`received`)."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from durable import OnActiveBusinessKey, Workflow, register

NAME = "test-stream"


class StreamInput(BaseModel):
    parts: int = 3  # chunks each publishing step sends
    pause: float = 0.0  # seconds between two chunks: a client follows them as they come
    wait: bool = False  # between the two steps, wait for an event "more"
    kind: str | None = None  # the kind the text chunks are published as (None: text)


class StreamState(StreamInput):
    said: int = 0


streaming = register(Workflow(name=NAME, version=1, state=StreamState, input=StreamInput,
                              events={"more": None}, on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


def publish(ctx: Any, state: StreamState) -> StreamState:
    for _ in range(state.parts):
        ctx.stream(f"part {state.said} ", kind=state.kind)
        state.said += 1
        time.sleep(state.pause)
    ctx.stream({"said": state.said}, kind="progress")
    return state


@streaming.step
def begin(ctx: Any, state: StreamState) -> StreamState:
    return publish(ctx, state)


@streaming.step
def hold(ctx: Any, state: StreamState) -> StreamState:
    if state.wait:
        ctx.wait_for_event("more")
    return state


@streaming.step
def go_on(ctx: Any, state: StreamState) -> StreamState:
    return publish(ctx, state)


def received(response: Any) -> Iterator[dict[str, Any]]:
    """A stream response's SSE events as they come, each as {id, event, data}."""
    for piece in response.streaming_content:
        for block in piece.decode().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != ":")
            if "event" in fields:
                yield {"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])}
