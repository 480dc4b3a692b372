"""The Python the README and docs/ show: it parses, and every name it imports from durable is public.

A workflow module imports what it writes against from `durable` itself (durable/__init__.py's `__all__`);
only a host project's wiring (its URLs, its Celery app, a setting read) and its calls into the services
(start a run, decide an approval) name a module of the apps. A page that imports a name from anywhere else
teaches an internal path that the next layout change breaks.
"""
from __future__ import annotations

import ast
import importlib

import pytest

import durable
from tests.pages import Block, python_blocks

APPS = ("durable", "approvals", "reconciliation")
# The modules a host project's own wiring and code import from, and what they take from each (docs/embedding.md):
# its URLs and Celery app, a setting read with its default, and the services its own code calls (as the
# console and the API do) to start a run or decide an approval.
HOST_WIRING = {
    "durable.exposition": {"metrics_page"},  # its urls.py: /metrics
    "durable.runtime.worker": {"configure"},  # its Celery app
    "durable.conf": {"durable_settings"},  # a DURABLE_* setting read with its default
    "durable.services": {"start_run"},
    "approvals.services": {"decide"},
    "approvals.models": {"ApprovalRequest"},
}


# The modules of the optional extras (docs/embedding.md#extras): a workflow module imports what each exports.
EXTRAS = ("durable.agents.pydantic_ai", "durable.agents.openai_agents")
# The test kit's module (docs/testing.md): a host's tests import what it exports.
KITS = ("durable.testing",)


def imports(block: Block) -> list[tuple[str, str]]:
    """(module, name) for every `from durable... import name` in the block."""
    found = []
    for node in ast.walk(ast.parse(block.text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in APPS:
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.split(".")[0] in APPS]
    return found


BLOCKS = python_blocks()
IMPORTS = sorted({(block.where, module, name) for block in BLOCKS for module, name in imports(block)})


def test_the_pages_import_from_durable_at_all():
    assert len(BLOCKS) > 10 and any(module == "durable" for _, module, _ in IMPORTS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_every_python_block_parses(block):
    ast.parse(block.text)


@pytest.mark.parametrize("where, module, name", IMPORTS)
def test_every_name_a_page_imports_is_public(where, module, name):
    imported = importlib.import_module(module)
    assert not name or hasattr(imported, name), f"{where}: `from {module} import {name}`: {module} has no {name}"
    if module == "durable":
        assert name in durable.__all__, f"{where}: {name} is not in durable.__all__"
    elif name in durable.__all__:
        pytest.fail(f"{where}: import {name} from durable, not from {module}")
    elif module in EXTRAS + KITS:
        assert name in imported.__all__, f"{where}: {module} does not export {name}"
    else:
        assert name in HOST_WIRING.get(module, ()), (
            f"{where}: `from {module} import {name}` is not public: export it from durable (durable/__init__.py) "
            "if workflow authors use it, or name it in HOST_WIRING if a host project's wiring does")


def test_every_public_name_resolves():
    assert all(getattr(durable, name) is not None for name in durable.__all__)
