"""A model request made streamed: its text published on the run's stream as it comes (`ctx.stream`), its whole
response recorded as an unstreamed request's is.

`DurableAgent.run(ctx, ..., stream=True)` makes each live model request this way. What is recorded, and what replay
returns, is the finished response, as without streaming: a replayed request publishes nothing, and one made again
after a crash publishes its text again (the stream is not the journal, docs/agents.md). Text deltas are gathered
for up to PUBLISH_EVERY_SECONDS into one chunk: a row per token would cost more than it shows.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings

PUBLISH_EVERY_SECONDS = 0.05


def text_of(event: Any) -> str:
    """The text a stream event adds to the model's answer ('' for a tool call, thinking, or the end)."""
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""


async def streamed_request(model: Model, messages: list[ModelMessage], settings: ModelSettings | None,
                           parameters: ModelRequestParameters, publish: Callable[[str], None]) -> ModelResponse:
    """`model.request(...)` made as a stream: its text handed to `publish` (off the agent's loop, in order) as it
    comes, gathered for up to PUBLISH_EVERY_SECONDS; the finished response returned."""
    pending: list[str] = []
    published_at = time.monotonic()
    async with model.request_stream(messages, settings, parameters) as response:
        async for event in response:
            if text := text_of(event):
                pending.append(text)
            if pending and time.monotonic() - published_at >= PUBLISH_EVERY_SECONDS:
                await asyncio.to_thread(publish, "".join(pending))  # a database write: never on the loop itself
                pending.clear()
                published_at = time.monotonic()
        if pending:
            await asyncio.to_thread(publish, "".join(pending))
        return response.get()
