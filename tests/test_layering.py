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
NOT_PRODUCTION = ("durable.tools", "durable.project", "durable.testing")  # the test kit runs in tests only
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



# The one door for a run's state: only the store (the worker, under its lease) and the transitions
# module change a run's status or create its checkpoints; everyone else asks them.
THE_DOOR = ("durable.store", "durable.runtime.transitions")
CREATES = frozenset({"create", "bulk_create", "get_or_create", "update_or_create"})
RUN_TABLES = ("UPDATE DURABLE_RUN ", "INSERT INTO DURABLE_RUN ", "INSERT INTO DURABLE_CHECKPOINT ")


def chain(node: ast.AST) -> list[str]:
    """The names a call or attribute is reached by, from its root: `Run.objects.filter(...).update` is
    ["Run", "objects", "filter", "update"]."""
    if isinstance(node, ast.Call):
        return chain(node.func)
    if isinstance(node, ast.Attribute):
        return [*chain(node.value), node.attr]
    if isinstance(node, ast.Subscript):
        return chain(node.value)
    return [node.id] if isinstance(node, ast.Name) else []


def _names_status(call: ast.Call) -> bool:
    """A write naming the status: as a keyword, or among bulk_update's fields."""
    return any(keyword.arg == "status" for keyword in call.keywords) or any(
        isinstance(node, ast.Constant) and node.value == "status" for arg in call.args for node in ast.walk(arg))


def _a_run(names: list[str]) -> bool:
    """Reached from the Run model, or from a name that says it holds runs (`runs.update(...)`, `run.status`)."""
    return bool(names) and (names[0] == "Run" or names[0].lower().rstrip("s").endswith("run"))


def state_writes(path: Path, *, raw_sql: bool = True) -> list[str]:
    """What a module does that only the door may: write a run's status, create a run or a checkpoint."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call):
            names = chain(node.func)
            if names[-1:] in (["update"], ["bulk_update"]) and _a_run(names) and _names_status(node):
                found.append((line, f"writes Run.status ({'.'.join(names)})"))
            elif names == ["Run"] or (names[:1] == ["Run"] and names[-1] in CREATES):
                found.append((line, "creates a Run"))
            elif names == ["Checkpoint"] or ((names[:1] == ["Checkpoint"] or "checkpoints" in names)
                                             and names[-1] in CREATES):
                found.append((line, "creates a Checkpoint"))
            elif names == ["setattr"] and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and node.args[1].value == "status" and _a_run(chain(node.args[0])):
                found.append((line, "sets a run's status"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "status" and (
                        _a_run(chain(target.value)) or "RunStatus" in ast.unparse(node.value or ast.Constant(None))):
                    found.append((line, f"sets a run's status ({ast.unparse(target)})"))
        elif raw_sql and isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = " ".join(node.value.upper().split()) + " "
            found.extend((line, f"{table.strip().lower()} by SQL") for table in RUN_TABLES if table in text)
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_only_the_store_and_the_transitions_module_change_a_runs_state():
    production = {name: path for name, path in modules(*APPS).items() if not name.startswith(NOT_PRODUCTION)}
    assert "durable.runtime.transitions" in production and "durable.store.base" in production
    offenders = {name: state_writes(path) for name, path in production.items() if not name.startswith(THE_DOOR)}
    assert {name: found for name, found in offenders.items() if found} == {}
    # The tools (drills, benchmarks) go through the door too; only their benchmark seeders insert rows by SQL.
    tools = {name: state_writes(path, raw_sql=False) for name, path in modules("durable").items()
             if name.startswith("durable.tools")}
    assert {name: found for name, found in tools.items() if found} == {}


def test_the_door_is_where_the_writes_are():
    """The rule reads what it should: the door's own modules are found writing."""
    files = modules("durable")
    assert any("creates a Checkpoint" in found for found in state_writes(files["durable.runtime.transitions"]))
    assert any("writes Run.status" in found for found in state_writes(files["durable.runtime.transitions"]))
    assert any("creates a Checkpoint" in found for found in state_writes(files["durable.store.base"]))
    assert any("update durable_run by SQL" in found for found in state_writes(files["durable.store.postgres"]))


def test_the_door_rule_catches_each_way_around_it(tmp_path):
    module = tmp_path / "sneaky.py"
    module.write_text(
        "def sneak(run, runs, run_id):\n"
        "    Run.objects.filter(id=run_id).update(status=RunStatus.PENDING)\n"
        "    runs.update(status='PENDING', error=None)\n"
        "    Run.objects.bulk_update([run], ['status'])\n"
        "    run.status = RunStatus.FAILED\n"
        "    run.save()\n"
        "    other.status = RunStatus.CANCELLED\n"
        "    setattr(run, 'status', 'FAILED')\n"
        "    Run.objects.create(status='RUNNING')\n"
        "    Run(workflow_name='x')\n"
        "    Checkpoint.objects.create(run=run, seq=1)\n"
        "    Checkpoint.objects.bulk_create([Checkpoint(run=run, seq=2)])\n"
        "    run.checkpoints.create(seq=3)\n"
        "    cursor.execute('''UPDATE durable_run\n SET status = %s''')\n"
        "    cursor.execute('INSERT INTO durable_checkpoint (run_id) VALUES (%s)')\n"
        "def innocent(row, request, response):\n"
        "    SideEffect.objects.filter(operation_id=row).update(status='UNKNOWN')\n"
        "    ApprovalRequest.objects.filter(id=request).update(status='EXPIRED')\n"
        "    response.status = 404\n"
        "    Run.objects.filter(id=row).update(waiting_for=None)\n"
    )
    found = state_writes(module)
    assert [line.split(":")[0] for line in found] == [f"line {n}" for n in
                                                      (2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 12, 13, 14, 16)], found


def test_the_apps_learn_of_checkpoints_from_the_runtime():
    """approvals asks durable.runtime.transitions what a migration left (taken_over_by_migration), never the rows."""
    offenders = {name: sorted(imported_names(name, path) & {"durable.models.Checkpoint"})
                 for name, path in modules(*BUILT_ON_THE_CORE).items()}
    assert {name: found for name, found in offenders.items() if found} == {}
