"""The demo's language models: deterministic scripted models, or an OpenAI-compatible endpoint."""
from __future__ import annotations

import json
import re
from typing import Any, Protocol, cast

from durable.conf import durable_settings
from durable.tools.demo.support_model import ScriptedSupportModel

ORDER_ID = re.compile(r"\bORD-\d+\b")
# What a prompt injection looks like to a model that obeys it, as real models too often do.
INJECTED_ORDER = re.compile(r"SYSTEM:\s*the order is\s+(ORD-\d+)", re.I)


class PlannerModel(Protocol):
    name: str

    def plan(self, message: str) -> dict[str, Any]: ...


class ScriptedModel:
    """Answers like an LLM asked to plan a claim, but always the same way for the same text."""

    name = "scripted"

    def plan(self, message: str) -> dict[str, Any]:
        # Like an LLM, it follows an instruction it finds in the text: the workflow must not trust its answer.
        match = INJECTED_ORDER.search(message) or ORDER_ID.search(message)
        intent = "refund" if re.search(r"refund|money back|charged|broken|damaged", message, re.I) else "question"
        order_id = match.group(match.lastindex or 0) if match else None
        return {"intent": intent, "order_id": order_id, "reason": message.strip()[:200]}


class OpenAICompatibleModel:
    """Any OpenAI-compatible chat endpoint. The SDK's own retries are off: durable owns retries."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout: float) -> None:
        try:
            from openai import OpenAI
        except ImportError:  # an optional part: production installs leave it out
            raise RuntimeError("DURABLE_LLM_BASE_URL is set but the demo's LLM client is not installed: "
                               "pip install 'durable[demo]'") from None

        self.name = model
        self._client = OpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=0, timeout=timeout)

    def plan(self, message: str) -> dict[str, Any]:
        completion = self._client.chat.completions.create(
            model=self.name,
            messages=[
                {"role": "system", "content": 'Plan a customer claim. Answer JSON: {"intent": "refund"|"question", '
                                              '"order_id": string|null, "reason": string}.'},
                {"role": "user", "content": message},
            ],
        )
        plan = json.loads(completion.choices[0].message.content or "{}")
        return {"intent": plan.get("intent"), "order_id": plan.get("order_id"), "reason": plan.get("reason", "")}

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One turn of a tool-calling conversation: the assistant's message, with its `tool_calls` if it asked
        for tools, and what the call used (`usage`), as JSON (it is recorded as the activity's result)."""
        # The conversation is kept as the JSON it is recorded in; the SDK's TypedDicts describe the same shapes.
        completion = self._client.chat.completions.create(model=self.name, messages=cast(Any, messages),
                                                          tools=cast(Any, tools))
        message = completion.choices[0].message
        calls = [{"id": call.id, "type": "function", "function": {"name": fn.name, "arguments": fn.arguments}}
                 for call in message.tool_calls or () if (fn := getattr(call, "function", None)) is not None]
        reply = {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})}
        used = completion.usage
        if used is None:  # an endpoint that does not say: the call is recorded without its usage
            return reply
        return {**reply, "usage": {"model": completion.model or self.name, "input_tokens": used.prompt_tokens,
                                   "output_tokens": used.completion_tokens}}


class SupportModel(Protocol):
    name: str

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]: ...


def _endpoint_model() -> OpenAICompatibleModel | None:
    if not durable_settings.DURABLE_LLM_BASE_URL:
        return None
    return OpenAICompatibleModel(
        base_url=durable_settings.DURABLE_LLM_BASE_URL, api_key=durable_settings.DURABLE_LLM_API_KEY,
        model=durable_settings.DURABLE_LLM_MODEL, timeout=durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS,
    )


def planner_model() -> PlannerModel:
    return _endpoint_model() or ScriptedModel()


def support_model() -> SupportModel:
    """The support agent's model: the endpoint when DURABLE_LLM_BASE_URL is set, else the scripted one."""
    return _endpoint_model() or ScriptedSupportModel()
