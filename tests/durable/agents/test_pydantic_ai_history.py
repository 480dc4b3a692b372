"""A conversation with a Pydantic AI agent over many visits costs what each visit adds: the message history kept
in the state is checkpointed as the messages appended, and each model request is recorded with the message it
added, not the whole history (issue 38)."""
from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai.messages import ModelMessagesTypeAdapter

from durable import OnActiveBusinessKey, Workflow, register, services
from durable.agents.pydantic_ai import MODEL_ACTIVITY
from durable.models import Checkpoint, JournalEntry
from durable.store.checkpoints import state_at
from tests.durable.agents.agent_workflows import Deps, test_agent
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)

VISITS = 4


class Chat(BaseModel):
    visits: int = 0
    messages: list[dict[str, Any]] = []


chat = Workflow(name="test-agent-history", version=1, state=Chat, input=Chat,
                prompt_release=test_agent.prompt_release, tool_catalog_version=test_agent.tool_catalog_version,
                model_policy_version="test", on_active_business_key=OnActiveBusinessKey.START_ANOTHER)


@chat.step(next=["ask"])
def ask(ctx: Any, state: Chat) -> Any:
    """Each visit asks the agent again, with the conversation so far: Pydantic AI's history, kept whole."""
    history = ModelMessagesTypeAdapter.validate_python(state.messages)
    result = test_agent.run(ctx, "scenario: lookups", deps=Deps("ORD-1004"), message_history=history)
    state.messages = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
    state.visits += 1
    return chat.goto("ask", state) if state.visits < VISITS else chat.finish(state)


register(chat)


def test_each_visit_checkpoints_the_messages_it_added_and_no_more(sandbox, settings):
    settings.DURABLE_TIME_SLICE_SECONDS = 0.0  # each visit in a task of its own: each resumes from what was stored
    run, _ = services.start_run(workflow="test-agent-history", business_key="ORD-1004", input={})
    while advance(run).status != "SUCCEEDED":
        assert run.status in ("PENDING", "RUNNING"), run.error
    rows = list(Checkpoint.objects.filter(run=run, seq__gte=2).order_by("seq"))
    assert len(rows) == VISITS - 1 and all(row.state is None for row in rows)
    for row in rows:
        before = state_at(run.id, row.seq - 1)["messages"]
        added = row.delta["keys"]["messages"]
        assert set(added) == {"+"}, added  # appended, never the history again
        assert state_at(run.id, row.seq)["messages"] == before + added["+"]
    requests = JournalEntry.objects.filter(run=run, kind="activity", name=MODEL_ACTIVITY)
    assert all(len(request.result["request"]["parts"]) <= 2 for request in requests)  # the message it added
