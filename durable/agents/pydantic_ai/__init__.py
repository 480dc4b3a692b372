"""Run an existing Pydantic AI agent durably inside a workflow step (the `durable[pydantic-ai]` extra).

    from durable.agents.pydantic_ai import Approval, DurableAgent, Operation, SideEffectTool, approved, usage_of

See docs/agents.md. Importing this package imports `pydantic_ai`; nothing else in durable does.
"""
from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401  (the extra's one dependency: said plainly when it is missing)
except ImportError as missing:  # pragma: no cover - the test extra installs it
    raise ImportError("durable.agents.pydantic_ai needs Pydantic AI: pip install 'durable[pydantic-ai]'") from missing

from durable.agents.pydantic_ai.agent import Approval, DurableAgent, SideEffectTool, approved
from durable.agents.pydantic_ai.errors import durable_error
from durable.agents.pydantic_ai.records import MODEL_ACTIVITY, Operation, usage_of

__all__ = ["MODEL_ACTIVITY", "Approval", "DurableAgent", "Operation", "SideEffectTool", "approved", "durable_error",
           "usage_of"]
