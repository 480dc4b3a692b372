"""Fake downstream services over real HTTP (stdlib only) that count every call and effect, with fault injection."""

from durable.tools.sandbox.server import SandboxServer
from durable.tools.sandbox.state import FAULT_MODES

__all__ = ["SandboxServer", "FAULT_MODES"]
