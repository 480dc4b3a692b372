"""How an agent's model requests and tool calls are recorded: as JSON a replay turns back into what the agent got.

A model request is recorded with what it added to the conversation, the model's response (both in the form
Pydantic AI's `ModelMessagesTypeAdapter` gives) and its usage. A tool call is recorded with its outcome: the value
it returned, or the answer it gave the model instead (`ModelRetry`, `ToolFailed`), or the operation a side-effect
tool asks for. A live call and a replayed one hand the agent the same thing: what the record reads back as.
"""
from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai.exceptions import ModelRetry, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, ToolReturn

from durable.agents.effects import Operation, operation_of, tool_value_outcome  # noqa: F401 (re-exported)
from durable.engine.errors import NonRetryableError

MODEL_ACTIVITY = "llm.request"  # every model request of an agent, in the order the agent makes them
_TOOL_RETURN = TypeAdapter(ToolReturn)


def tool_activity(name: str) -> str:
    return f"tool.{name}"


# Operation: durable/agents/effects.py (re-exported here, where the wrapper's callers have imported it from).


# -- model requests --------------------------------------------------------------------------------------------

def model_call(messages: list[ModelMessage], response: ModelResponse) -> dict[str, Any]:
    """The record of one model request: the message it added, the response, and the response's usage."""
    return {"request": _message_json(messages[-1]) if messages else None, "response": _message_json(response),
            "usage": usage_of(response)}


def response_of(record: Mapping[str, Any]) -> ModelResponse:
    """The model's response a record holds, as the agent gets it, live and on replay alike."""
    [response] = ModelMessagesTypeAdapter.validate_python([record["response"]])
    if not isinstance(response, ModelResponse):
        raise NonRetryableError("a recorded model request holds no model response", kind="replay_unreadable")
    return response


def usage_of(response: ModelResponse | Mapping[str, Any]) -> dict[str, Any]:
    """The model and the tokens one request used: {"model", "input_tokens", "output_tokens"}.

    Takes the response, or a model request's record (what `llm.request` activities hold in the journal).
    """
    if isinstance(response, Mapping):
        if "usage" in response:
            return dict(response["usage"])
        response = response_of(response)
    return {"model": response.model_name or "", "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens}


def _message_json(message: ModelMessage) -> dict[str, Any]:
    dumped: dict[str, Any] = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    return dumped


# -- tool calls ------------------------------------------------------------------------------------------------

async def tool_outcome(call: Awaitable[Any]) -> dict[str, Any]:
    """Make a tool call and say how it ended, as recorded: the answers a tool gives the model are outcomes too.

    Any other error is raised: it is not the tool's answer, and durable's retry policy decides what it means.
    """
    try:
        value = await call
    except ModelRetry as retry:
        return {"retry": retry.message}
    except ToolFailed as failed:
        return {"failed": failed.message}
    if isinstance(value, ToolReturn):
        return {"tool_return": _TOOL_RETURN.dump_python(value, mode="json")}
    return tool_value_outcome(value)


def tool_answer(outcome: Mapping[str, Any]) -> Any:
    """What the agent gets for a recorded tool call: its value, or the answer it gave the model, raised."""
    if "retry" in outcome:
        raise ModelRetry(outcome["retry"])
    if "failed" in outcome:
        raise ToolFailed(outcome["failed"])
    if "tool_return" in outcome:
        return _TOOL_RETURN.validate_python(outcome["tool_return"])
    if "return" in outcome:
        return outcome["return"]
    raise NonRetryableError(f"a recorded tool call holds no answer the agent can take: {sorted(outcome)}",
                            kind="replay_unreadable")
