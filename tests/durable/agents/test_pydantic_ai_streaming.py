"""DurableAgent.run(..., stream=True) (durable/agents/pydantic_ai/streaming.py): the model's text is published on
the run's stream as it comes, the response recorded is the whole answer, and a visit run again replays the request
without publishing it again."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from durable import OnActiveBusinessKey, Workflow, register, send_event, services
from durable.agents.pydantic_ai import DurableAgent
from durable.engine.states import RunStatus
from durable.models import StreamChunk
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the chunks are written from other threads

WORDS = ["Your ", "refund ", "is ", "on ", "its ", "way."]
asked: list[str] = []


async def words(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    asked.append("model")
    for word in WORDS:
        await asyncio.sleep(0.01)
        yield word


chat = DurableAgent(Agent(FunctionModel(stream_function=words), name="test-stream-agent"))


class Chat(BaseModel):
    answer: str = ""
    wait: bool = False


chatting = register(Workflow(name="test-agent-stream", version=1, state=Chat, input=Chat, events={"go": None},
                             on_active_business_key=OnActiveBusinessKey.START_ANOTHER))


@chatting.step
def answer(ctx: Any, state: Chat) -> Chat:
    state.answer = chat.run(ctx, "where is my refund?", stream=True).output
    if state.wait:
        ctx.wait_for_event("go")  # woken, the visit runs again: the agent replays its request
    return state


def published(run_id: object) -> str:
    return "".join(StreamChunk.objects.filter(run_id=run_id, kind="text").values_list("data", flat=True))


def test_the_models_text_is_streamed_as_it_comes_and_the_whole_answer_recorded():
    asked.clear()
    run, _ = services.start_run(workflow="test-agent-stream", input={}, business_key="CHAT-1")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert published(run.id) == "".join(WORDS) == run.output["answer"]
    assert asked == ["model"]


def test_a_visit_run_again_replays_the_request_and_publishes_nothing_more():
    asked.clear()
    run, _ = services.start_run(workflow="test-agent-stream", input={"wait": True}, business_key="CHAT-2")
    assert advance(run).status == RunStatus.WAITING
    chunks = StreamChunk.objects.filter(run=run).count()
    send_event(run_id=run.id, name="go")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["answer"] == "".join(WORDS)
    assert StreamChunk.objects.filter(run=run).count() == chunks and asked == ["model"]
