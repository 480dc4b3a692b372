"""durable.Context: what a step may ask of durable is the Protocol authors annotate with, and exactly what the worker
hands a step. mypy proves the runtime's step context is one (durable/runtime/context.py, bin/test) and checks the
example host's workflow module against it (pyproject.toml); these tests hold the rest at run time."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from django.conf import settings
from pydantic import BaseModel
from typing_extensions import get_protocol_members

import durable
from durable import Context, Workflow, services
from durable.context import Context as DeclaredContext
from durable.registry import registry
from durable.runtime import executor
from durable.runtime.context import StepContext

ROOT = Path(settings.BASE_DIR)
AUTHORS = set(get_protocol_members(Context))


class Empty(BaseModel):
    pass


@pytest.fixture
def handed_over(monkeypatch) -> list[Context]:
    """The context each visit of the test-context workflow's one step was given."""
    seen: list[Context] = []
    workflow = Workflow(name="test-context", version=1, state=Empty, input=Empty)

    @workflow.step
    def look(ctx: Context, state: Empty) -> Empty:
        seen.append(ctx)
        return state

    monkeypatch.setitem(registry._by_key, (workflow.name, workflow.version), workflow)
    return seen


@pytest.mark.django_db
def test_a_step_is_given_exactly_what_durable_context_promises(handed_over):
    run, _ = services.start_run(workflow="test-context", input={}, business_key="k-1")
    executor.advance(run.id)
    [ctx] = handed_over
    given = {name for name in dir(ctx) if not name.startswith("_")}
    assert given == AUTHORS  # nothing of the machinery shows, nothing promised is missing
    assert (ctx.run_id, ctx.business_key, ctx.workflow_name, ctx.step, ctx.visit, ctx.visit_number) == (
        run.id, "k-1", "test-context", "look", 0, 1)


def test_the_promise_names_the_calls_authors_make():
    assert {"activity", "call", "effect", "parallel", "side_effect", "request_approval", "sleep", "sleep_until",
            "wait_for_event", "start_child", "wait_child", "wait_children", "run_id", "business_key",
            "workflow_name", "workflow_version", "step", "attempt", "visit", "visit_number",
            "replayed_calls", "patched", "stream"} == AUTHORS


@pytest.mark.parametrize("name", sorted(name for name in AUTHORS if callable(getattr(Context, name))))
def test_each_call_takes_the_arguments_durable_context_documents(name):
    promised = inspect.signature(getattr(Context, name)).parameters.values()
    made = inspect.signature(getattr(StepContext, name)).parameters.values()
    assert [(p.name, p.kind, p.default) for p in made] == [(p.name, p.kind, p.default) for p in promised]
    assert getattr(Context, name).__doc__, f"ctx.{name} has no reference for authors"


def test_authors_import_the_context_from_durable_and_their_type_checker_sees_it():
    assert durable.Context is DeclaredContext and "Context" in durable.__all__
    # `import X as X` under TYPE_CHECKING: what a host's mypy --strict (no implicit re-export) reads
    tree = ast.parse((ROOT / "durable" / "__init__.py").read_text())
    assert any(isinstance(node, ast.ImportFrom) and node.module == "durable.context"
               and [(a.name, a.asname) for a in node.names] == [("Context", "Context")] for node in ast.walk(tree))


def private_reaches(path: Path) -> list[str]:
    """`thing._member` where `thing` is not `self`, `cls` or a module the file imports: reaching inside another."""
    tree = ast.parse(path.read_text())
    modules = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
               for alias in node.names} | {alias.asname or alias.name for node in ast.walk(tree)
                                           if isinstance(node, ast.Import) for alias in node.names}
    return [f"{path.name}:{node.lineno} {node.value.id}.{node.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name) and node.value.id not in {"self", "cls", *modules}]


def test_the_machinery_takes_the_visit_and_never_reaches_inside_the_context(tmp_path):
    runtime = ROOT / "durable" / "runtime"
    assert [reach for name in ("waits", "parallel", "side_effects", "visit", "context")
            for reach in private_reaches(runtime / f"{name}.py")] == []
    reaching = tmp_path / "reaching.py"  # the check sees what it forbids
    reaching.write_text("from durable import metrics\n\ndef f(ctx):\n    metrics._x\n    return ctx._store\n")
    assert private_reaches(reaching) == ["reaching.py:5 ctx._store"]


def test_one_step_context_in_the_codebase():
    defined = [path.relative_to(ROOT).as_posix() for app in ("durable", "approvals", "reconciliation")
               for path in (ROOT / app).rglob("*.py")
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef) and node.name in ("StepContext", "Context")]
    assert sorted(defined) == ["durable/context.py", "durable/runtime/context.py"]
