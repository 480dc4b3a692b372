"""Which way imports go (docs/architecture.md): the engine imports only the standard library, the core imports
no app built on it and no tool, production code never imports the tools, and no two modules import each other."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from durable.tools.checks import check_fault_injection

ROOT = Path(settings.BASE_DIR)
APPS = ("durable", "approvals", "reconciliation")
NOT_PRODUCTION = ("durable.tools", "durable.project")
BUILT_ON_THE_CORE = ("approvals", "reconciliation")

IMPORT_EVERY_PRODUCTION_MODULE = """
import importlib, json, pkgutil, sys
import django
django.setup()

def walk(package):
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.startswith(%(skip)r):
            continue
        module = importlib.import_module(info.name)
        yield info.name
        if info.ispkg:
            yield from walk(module)

imported = [name for app in %(apps)r for name in walk(importlib.import_module(app))]
print(json.dumps({"imported": len(imported), "tools": sorted(m for m in sys.modules if m.startswith("durable.tools"))}))
"""


def test_production_code_never_imports_the_tools():
    # A host project's process: the three apps installed, the tools app not.
    code = IMPORT_EVERY_PRODUCTION_MODULE % {"skip": NOT_PRODUCTION, "apps": APPS}
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.host_settings"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["imported"] > 80 and report["tools"] == []


def modules(*apps: str) -> dict[str, Path]:
    """The dotted name of each module of `apps` (migrations left out) and its file."""
    found = {}
    for app in apps:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_statements(name: str, path: Path) -> list[list[str]]:
    """What each import statement of module `name` names, at the top or inside a function, relative imports
    resolved: `from a import b` names both `a` and `a.b` (b may be a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    statements = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            statements.append([alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[:len(parts) - node.level + 1], *filter(None, [base])])
            statements.append([base, *(f"{base}.{alias.name}" for alias in node.names)])
    return statements


def imported_names(name: str, path: Path) -> set[str]:
    return {target for statement in import_statements(name, path) for target in statement}


def module_graph() -> dict[str, set[str]]:
    """Each module of the apps and the modules of the apps it imports (anywhere in it, functions included)."""
    files = modules(*APPS)
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for targets in import_statements(name, path):
            for target in targets:
                # `from durable import dispatch` names the module durable.runtime.dispatch, not the package's __init__
                if target in files and target != name and not (target in APPS and f"{target}." in " ".join(targets)):
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_through_others():
    graph = module_graph()
    assert "durable.audit" in graph["approvals.services"]  # the graph sees imports
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_production_modules_import_no_tool():
    graph = module_graph()
    offenders = {name: sorted(t for t in targets if t.startswith("durable.tools"))
                 for name, targets in graph.items() if not name.startswith(NOT_PRODUCTION)}
    assert {name: t for name, t in offenders.items() if t} == {}


def test_fault_injection_is_refused_without_debug():
    [error] = check_fault_injection(debug=False, points={"after_started"})
    assert error.id == "durable_tools.E001" and "DURABLE_FAULT_POINTS=after_started" in error.msg
    assert check_fault_injection(debug=True, points={"after_started"}) == []
    assert check_fault_injection(debug=False, points=set()) == []


def test_a_process_with_fault_injection_armed_and_debug_off_fails_its_checks():
    env = {**os.environ, "DURABLE_FAULT_POINTS": "after_started", "DJANGO_DEBUG": "false"}
    out = subprocess.run([sys.executable, "manage.py", "check"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and "durable_tools.E001" in out.stderr


def core_modules() -> dict[str, Path]:
    """durable's own modules, without the tools and the standalone project (which may import anything)."""
    return {name: path for name, path in modules("durable").items() if not name.startswith(NOT_PRODUCTION)}


def test_the_engine_imports_only_the_standard_library():
    engine = {name: path for name, path in core_modules().items() if name.startswith("durable.engine")}
    assert len(engine) > 15  # every engine module is read
    offenders = {}
    for name, path in engine.items():
        outside = {target for target in imported_names(name, path)
                   if target.split(".")[0] not in sys.stdlib_module_names and not target.startswith("durable.engine")}
        if outside:
            offenders[name] = sorted(outside)
    assert offenders == {}


def test_the_core_imports_no_app_built_on_it_and_no_tool_not_even_inside_a_function():
    offenders = {}
    for name, path in core_modules().items():
        banned = {target for target in imported_names(name, path)
                  if target.split(".")[0] in BUILT_ON_THE_CORE or target.startswith("durable.tools")}
        if banned:
            offenders[name] = sorted(banned)
    assert offenders == {}


def test_the_core_urls_include_no_app_by_its_dotted_name():
    """`include("approvals.urls")` imports by string: the apps mount themselves (durable/mounts.py)."""
    offenders = []
    for name, path in core_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "include"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and (node.args[0].value.split(".")[0] in BUILT_ON_THE_CORE
                         or node.args[0].value.startswith("durable.tools"))):
                offenders.append((name, node.args[0].value))
    assert offenders == []


def test_the_layering_checks_see_what_they_forbid(tmp_path):
    module = tmp_path / "late.py"
    module.write_text("def later():\n    from approvals.gate import Gate\n    from . import sibling\n")
    assert imported_names("durable.runtime.late", module) == {"approvals.gate", "approvals.gate.Gate", "durable.runtime",
                                                         "durable.runtime.sibling"}

