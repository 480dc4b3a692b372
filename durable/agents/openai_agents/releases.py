"""What a run of an OpenAI Agents SDK agent is pinned to: its agents' models and instructions (`prompt_release`),
their tools and handoffs (`tool_catalog_version`), read from the agent and every agent it can hand off to.

Each is the durable agent's name and a short hash, as the Pydantic AI wrapper's are (docs/agents.md, "What a run
is pinned to"): static instructions as they are, an instructions function by its source code.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.models.interface import Model

from durable.agents.releases import described, release
from durable.engine.ids import canonical_json


def agents_of(agent: Agent[Any]) -> Iterator[Agent[Any]]:
    """The agent and every agent it can hand off to, each once, in a stable order."""
    seen: set[int] = set()
    pending = [agent]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(target for target in map(handoff_target, current.handoffs) if target is not None)


def handoff_target(handoff: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | None:
    """The agent a handoff hands to (a `Handoff` object says it through the agent it was made from)."""
    if isinstance(handoff, Agent):
        return handoff
    found = getattr(handoff, "_agent_ref", None)  # agents.handoff() keeps a weak reference to its agent
    target = found() if callable(found) else None
    return target if isinstance(target, Agent) else None


def prompt_release(name: str, agent: Agent[Any]) -> str:
    """Each agent's name, model and instructions."""
    return release(name, "prompt", [{"agent": a.name, "model": _pinned_model(a.model),
                                     "instructions": _described(a.instructions)} for a in agents_of(agent)])


def tool_catalog_version(name: str, agent: Agent[Any], side_effects: Mapping[str, Any],
                         approvals: Mapping[str, Any]) -> str:
    """Each agent's tools as the model sees them, what durable does with each, and whom it may hand off to."""
    catalog = []
    for each in agents_of(agent):
        tools = [{"name": tool.name, "description": tool.description, "parameters": tool.params_json_schema,
                  "side_effect": getattr(side_effects.get(tool.name), "action", None),
                  "approval": getattr(approvals.get(tool.name), "kind", None)}
                 if isinstance(tool, FunctionTool) else {"hosted": getattr(tool, "name", type(tool).__name__)}
                 for tool in each.tools]
        handoffs = [getattr(handoff, "agent_name", getattr(handoff, "name", "")) for handoff in each.handoffs]
        catalog.append({"agent": each.name, "tools": sorted(tools, key=canonical_json), "handoffs": handoffs})
    return release(name, "tools", catalog)


def model_name(model: Model | str | None) -> str:
    """The name a model's usage is metered and priced under."""
    if model is None:
        return "default"
    if isinstance(model, str):
        return model
    named = getattr(model, "model", None) or getattr(model, "name", None)
    return named if isinstance(named, str) else type(model).__qualname__


def _pinned_model(model: Model | str | None) -> str | None:
    """A model as a run is pinned to it: its name, or its class and the name it was built with."""
    if model is None or isinstance(model, str):
        return model
    built_with = vars(model).get("model")  # OpenAIChatCompletionsModel(model="gpt-4o-mini", ...) and the like
    return f"{type(model).__module__}.{type(model).__qualname__}:{built_with if isinstance(built_with, str) else ''}"


def refuse_client_retries(agent: Agent[Any]) -> None:
    """durable's retry policy is the one owner (invariant 6): a model that retries by itself is refused."""
    for each in agents_of(agent):
        if each.model_settings.retry is not None:
            raise ValueError(f"agent {each.name!r} has model_settings.retry: durable's retry policy is the only one "
                             "(docs/agents.md, \"Retries\"); remove it")
        client = getattr(each.model, "_client", None)
        retries = getattr(client, "max_retries", 0)
        if isinstance(retries, int) and retries > 0:
            raise ValueError(f"the client of agent {each.name!r}'s model retries failed requests itself "
                             f"(max_retries={retries}): build it with AsyncOpenAI(max_retries=0), so that durable's "
                             "retry policy is the only one (docs/agents.md, \"Retries\")")


def _described(part: Any) -> str | None:
    return None if part is None else described(part)
