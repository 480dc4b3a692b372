"""Run an existing OpenAI Agents SDK agent durably inside a workflow step (the `durable[openai-agents]` extra).

    from durable.agents.openai_agents import Approval, DurableAgent, Operation, SideEffectTool, approved

See docs/agents.md. Importing this package imports `agents` (the SDK); nothing else in durable does.
"""
from __future__ import annotations

try:
    import agents  # noqa: F401  (the extra's one dependency: said plainly when it is missing)
except ImportError as missing:  # pragma: no cover - the test extra installs it
    raise ImportError("durable.agents.openai_agents needs the OpenAI Agents SDK: "
                      "pip install 'durable[openai-agents]'") from missing

from durable.agents.openai_agents.agent import Approval, DurableAgent, SideEffectTool, approved
from durable.agents.openai_agents.errors import durable_error
from durable.agents.openai_agents.records import MODEL_ACTIVITY, Operation, usage_of

__all__ = ["MODEL_ACTIVITY", "Approval", "DurableAgent", "Operation", "SideEffectTool", "approved", "durable_error",
           "usage_of"]
