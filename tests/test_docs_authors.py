"""What an author reads and copies is typed and named (docs/workflows.md, "Errors a step may catch"): every step in
the docs, the demos and the example host project annotates its `ctx` as `durable.Context`, and the page's table of
errors names exactly the exceptions `durable` exports."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import durable
from tests.pages import ROOT, python_blocks

# Where authors copy from: the demo workflows (and the drills' and benchmarks'), the example host project's.
SOURCES = sorted([*(ROOT / "durable" / "tools").rglob("*.py"), *(ROOT / "examples").rglob("*.py")])


def steps(tree: ast.AST) -> list[ast.FunctionDef]:
    """The functions whose first parameter is `ctx`, a step's context (an SDK's tools take its own: pydantic-ai's a
    RunContext, the OpenAI Agents SDK's a RunContextWrapper)."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
            and node.args.args and node.args.args[0].arg == "ctx"]


def untyped(tree: ast.AST) -> list[str]:
    wrong = []
    for step in steps(tree):
        annotation = step.args.args[0].annotation
        shown = ast.unparse(annotation) if annotation is not None else "nothing"
        if shown != "Context" and not shown.startswith(("RunContext[", "RunContextWrapper[")):
            wrong.append(f"{step.name} (line {step.lineno}): ctx is {shown}")
    return wrong


@pytest.mark.parametrize("block", python_blocks(), ids=lambda block: block.where)
def test_every_step_a_page_shows_types_its_ctx_as_durable_context(block):
    assert untyped(ast.parse(block.text)) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_step_of_the_demos_and_the_example_project_types_its_ctx_as_durable_context(path: Path):
    assert untyped(ast.parse(path.read_text())) == []


def test_the_demos_have_steps_to_check():
    assert sum(len(steps(ast.parse(path.read_text()))) for path in SOURCES) > 5


def test_the_errors_a_step_may_catch_are_exactly_the_exceptions_durable_exports():
    page = (ROOT / "docs" / "workflows.md").read_text()
    table = page.split("## Errors a step may catch", 1)[1].split("\n## ", 1)[0]
    listed = {name for row in table.splitlines() if row.startswith("| `")
              for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    exported = {name for name in durable.__all__
                if isinstance(getattr(durable, name), type) and issubclass(getattr(durable, name), BaseException)}
    assert listed == exported
