"""Agents written with an agent SDK, run durably inside a workflow step: one subpackage per SDK.

Importing this package imports no SDK: `durable.agents.pydantic_ai` needs the `durable[pydantic-ai]` extra and is
imported only by the workflow modules that use it (docs/agents.md).
"""
