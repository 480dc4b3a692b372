"""How an OpenAI Agents SDK agent's model responses and tool calls are recorded: JSON a replay turns back.

A model response is recorded with its output items (in the Responses API's form, as the SDK holds them), its
response id and its usage. A tool call is recorded with its outcome: the value it returned, or the operation a
side-effect tool asks for. A live call and a replayed one hand the agent the same thing: what the record reads
back as.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any

from agents.items import ModelResponse, TResponseOutputItem
from agents.usage import Usage as SdkUsage
from pydantic import TypeAdapter

from durable.agents.effects import Operation, operation_of, tool_value_outcome  # noqa: F401 (re-exported)
from durable.engine.errors import NonRetryableError

MODEL_ACTIVITY = "llm.request"  # every model request of an agent run, in the order the run makes them
_OUTPUT = TypeAdapter(list[TResponseOutputItem])


def tool_activity(name: str) -> str:
    return f"tool.{name}"


def handoff_activity(name: str) -> str:
    return f"handoff.{name}"


# Operation: durable/agents/effects.py (re-exported here, where the wrapper's callers have imported it from).


# -- model requests --------------------------------------------------------------------------------------------

def model_call(model: str, response: ModelResponse) -> dict[str, Any]:
    """The record of one model request: the response's output items, its id, and what it used."""
    return {"response": {"output": _OUTPUT.dump_python(response.output, mode="json", exclude_unset=True),
                         "response_id": response.response_id},
            "usage": {"model": model, "input_tokens": response.usage.input_tokens,
                      "output_tokens": response.usage.output_tokens}}


def response_of(record: Mapping[str, Any]) -> ModelResponse:
    """The model's response a record holds, as the agent gets it, live and on replay alike."""
    try:
        output = _OUTPUT.validate_python(record["response"]["output"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NonRetryableError(f"a recorded model request holds no readable response: {exc}",
                                kind="replay_unreadable") from None
    used = record.get("usage") or {}
    usage = SdkUsage(requests=1, input_tokens=used.get("input_tokens", 0), output_tokens=used.get("output_tokens", 0),
                     total_tokens=used.get("input_tokens", 0) + used.get("output_tokens", 0))
    return ModelResponse(output=output, usage=usage, response_id=record["response"].get("response_id"))


def usage_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The model and the tokens one recorded request used: {"model", "input_tokens", "output_tokens"}."""
    return dict(record["usage"])


# -- tool calls ------------------------------------------------------------------------------------------------

async def tool_outcome(call: Awaitable[Any]) -> dict[str, Any]:
    """Make a tool call and say how it ended, as recorded: its value, or the operation it describes.

    An error is raised: the SDK's function tools turn their body's errors into an answer to the model by default
    (`failure_error_function`), so what reaches here is one the tool chose to raise, and durable's retry policy
    decides what it means.
    """
    return tool_value_outcome(await call)


def tool_answer(outcome: Mapping[str, Any]) -> Any:
    """What the agent gets for a recorded tool call: a text as it is, any other value as JSON text."""
    if "return" not in outcome:
        raise NonRetryableError(f"a recorded tool call holds no answer the agent can take: {sorted(outcome)}",
                                kind="replay_unreadable")
    return as_text(outcome["return"])


def as_text(value: Any) -> Any:
    """A tool's answer as the model reads it: JSON for a dict or a list (the SDK would send Python's repr)."""
    return json.dumps(value) if isinstance(value, (dict, list)) else value
