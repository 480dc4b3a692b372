"""What a run of an agent is pinned to: its model and prompt (`prompt_release`), its tools (`tool_catalog_version`).

Each is the agent's name and a short hash of what it is made of, read from the agent's definition when the
workflow module is imported. A workflow declares them and pins them (`Workflow(..., prompt_release=...,
pinned=("prompt_release", "tool_catalog_version"))`): a run that started under one system prompt is blocked
(BLOCKED_VERSION) rather than resumed under another, until an operator migrates or cancels it.

The system prompts and instructions are read from the agent's own fields (Pydantic AI has no public reader for
them): static text as it is, a prompt or instruction function by its source code, so editing the function changes
the release. Text such a function reads from elsewhere at run time is not seen: name it in the agent's `name`, or
pin a release of your own (docs/agents.md, "What a run is pinned to").
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from durable.agents.releases import described, release
from durable.engine.ids import canonical_json


def prompt_release(name: str, agent: Agent[Any, Any]) -> str:
    """The agent's model and everything it is told before the conversation: its system prompts and instructions."""
    prompts = [*getattr(agent, "_system_prompts", ()),
               *(described(runner.function) for runner in getattr(agent, "_system_prompt_functions", ())),
               *(described(getattr(item, "instruction", item)) for item in getattr(agent, "_instructions", ()))]
    return release(name, "prompt", {"model": model_name(agent.model), "prompts": prompts})


def tool_catalog_version(name: str, agent: Agent[Any, Any], side_effects: Mapping[str, Any],
                         approvals: Mapping[str, Any]) -> str:
    """The agent's tools as the model sees them, and what durable does with each (a side effect, an approval)."""
    tools: list[dict[str, Any]] = []

    def visit(toolset: AbstractToolset[Any]) -> None:
        if not isinstance(toolset, FunctionToolset):  # tools found at run time (MCP...): the toolset itself
            tools.append({"toolset": type(toolset).__qualname__, "id": toolset.id})
            return
        for tool in toolset.tools.values():
            action = side_effects.get(tool.name)
            approval = approvals.get(tool.name)
            tools.append({"name": tool.name, "description": tool.description,
                          "parameters": tool.function_schema.json_schema, "requires_approval": tool.requires_approval,
                          "side_effect": getattr(action, "action", None), "approval": getattr(approval, "kind", None)})

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return release(name, "tools", sorted(tools, key=canonical_json))


def model_name(model: Model | str | None) -> str:
    if model is None:
        raise ValueError("give the agent its model (Agent(model, ...)): a durable run is pinned to it")
    if isinstance(model, str):
        return model
    return f"{model.system}:{model.model_name}"


def refuse_client_retries(model: Model | str | None) -> None:
    """durable's retry policy is the one owner (invariant 6): a model whose client retries by itself is refused."""
    if isinstance(model, str):
        raise ValueError(f"give the agent a Model, not the name {model!r}: the client Pydantic AI would build for "
                         "it retries failed requests itself. Build the model with a client whose retries are off "
                         "(an OpenAI-compatible one: AsyncOpenAI(max_retries=0)); durable retries (docs/agents.md)")
    for part in _models(model):
        retries = getattr(getattr(part, "client", None), "max_retries", 0)
        if isinstance(retries, int) and retries > 0:
            raise ValueError(f"the client of model {model_name(part)!r} retries failed requests itself "
                             f"(max_retries={retries}): build it with max_retries=0, so that durable's retry policy "
                             "is the only one (docs/agents.md, \"Retries\")")


def _models(model: Model | None) -> Iterable[Model]:
    """The model and the models it wraps or falls back to."""
    if model is None:
        return
    yield model
    wrapped = getattr(model, "wrapped", None)
    if isinstance(wrapped, Model):
        yield from _models(wrapped)
    for other in getattr(model, "models", ()) or ():
        if isinstance(other, Model):
            yield from _models(other)
