"""What every SDK's wrapper pins a run to, made alike: a release id is the durable agent's name, what it pins and a
short hash of it, and a prompt part is pinned by its text or its function's source. Imports no SDK
(durable/agents/pydantic_ai/releases.py, durable/agents/openai_agents/releases.py say what each pins)."""
from __future__ import annotations

import hashlib
import inspect
from typing import Any

from durable.engine.ids import canonical_json

RELEASE_LENGTH = 100  # the Run's release columns


def described(part: Any) -> str:
    """A prompt part as it is pinned: its text, or a function's source (its name when the source is unavailable)."""
    if isinstance(part, str):
        return part
    try:
        return inspect.getsource(part)
    except (OSError, TypeError):
        return f"{getattr(part, '__module__', '?')}.{getattr(part, '__qualname__', repr(part))}"


def release(name: str, what: str, made_of: Any) -> str:
    """`name-what-hash`, cut to fit the Run's release columns: the hash of `made_of` as canonical JSON."""
    digest = hashlib.sha256(canonical_json(made_of).encode()).hexdigest()[:12]
    suffix = f"-{what}-{digest}"
    return name[:RELEASE_LENGTH - len(suffix)] + suffix
