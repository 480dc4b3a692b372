"""What a step's own source says about its side effects and approvals, read with `ast` before launch.

The launch checks (durable/checks.py) use it to see, without running anything, whether every
`ctx.side_effect(...)` names a business key that is the same on every re-execution, and
whether every `ctx.request_approval(...)` declares its revalidation and expiry. It reads only
the step function's body: calls made inside helper functions it calls are not seen.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

SIDE_EFFECT, REQUEST_APPROVAL = "side_effect", "request_approval"

# Calls whose result differs on every re-execution: a business key built from one gives each
# retry or resume a new operation id, so the ledger cannot recognise the operation again.
_UNSTABLE_NAMES = frozenset({
    "uuid.uuid1", "uuid.uuid4", "uuid1", "uuid4",
    "time.time", "time.time_ns", "time.monotonic", "time.perf_counter",
    "datetime.now", "datetime.utcnow", "datetime.today", "date.today",
    "timezone.now", "timezone.localtime", "timezone.localdate",
    "os.urandom", "urandom", "id",
})
_UNSTABLE_MODULES = frozenset({"random", "secrets"})


class SourceUnavailable(Exception):
    """The step's source cannot be read or parsed (built at run time, a C function, a partial...)."""


@dataclass(frozen=True)
class Call:
    """One `*.side_effect(...)` or `*.request_approval(...)` call in a step's body."""

    kind: str  # SIDE_EFFECT or REQUEST_APPROVAL
    line: int  # in the step's source file
    keywords: dict[str, ast.expr]  # the arguments passed by name
    passes_kwargs: bool  # `**options`: what it holds cannot be read
    first: str | None  # the first positional argument when it is a string literal (action or kind)
    unstable: tuple[str, ...]  # random or time-based calls that feed `business_key`

    def passes(self, name: str) -> bool:
        """Is `name` passed by name, and not as a literal None?"""
        value = self.keywords.get(name)
        return value is not None and not (isinstance(value, ast.Constant) and value.value is None)


@dataclass(frozen=True)
class StepSource:
    filename: str
    calls: tuple[Call, ...]

    def of_kind(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind]


def read_step(fn: Callable[..., Any]) -> StepSource:
    """Parse a step function and find its side-effect and approval calls."""
    try:
        lines, first_line = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError) as exc:
        raise SourceUnavailable(f"{type(exc).__name__}: {exc}") from None
    body = next((node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if body is None:  # a lambda's line(s) parse, but hold more than the step
        raise SourceUnavailable("no function definition found in its source")
    assigned = _assignments(body)
    offset = max(first_line, 1) - 1
    calls = tuple(_call(node, assigned, offset) for node in ast.walk(body)
                  if isinstance(node, ast.Call) and _method(node) in (SIDE_EFFECT, REQUEST_APPROVAL))
    return StepSource(filename, calls)


def steps_that_ask(steps: Iterable[Any]) -> list[str]:
    """The names of the steps whose own source asks for an approval (a step whose source cannot be read is not
    counted): the fault drill cannot drill them, since it does not approve."""
    asking = []
    for step in steps:
        try:
            if read_step(step.fn).of_kind(REQUEST_APPROVAL):
                asking.append(step.name)
        except SourceUnavailable:
            pass
    return asking


def dotted_name(node: ast.expr) -> str:
    """`uuid.uuid4` for the expression `uuid.uuid4`; empty when it is not a plain dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_unstable(name: str) -> bool:
    """Does calling `name` give a different value each time (random, clock, object identity)?"""
    parts = name.split(".")
    return parts[0] in _UNSTABLE_MODULES or name in _UNSTABLE_NAMES or ".".join(parts[-2:]) in _UNSTABLE_NAMES


def _method(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ""


def _call(node: ast.Call, assigned: dict[str, list[ast.expr]], offset: int) -> Call:
    keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    first = node.args[0] if node.args else keywords.get("action") or keywords.get("kind")
    literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    key = keywords.get("business_key")
    unstable = tuple(_unstable_calls(key, assigned)) if key is not None else ()
    return Call(_method(node), node.lineno + offset, keywords, any(kw.arg is None for kw in node.keywords),
                literal, unstable)


def _assignments(fn: ast.AST) -> dict[str, list[ast.expr]]:
    """Every value assigned to each local name, so `key = str(uuid4()); ...business_key=key` is seen."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            for name in _names(target):
                assigned.setdefault(name, []).append(value)
    return assigned


def _names(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            yield node.id


def _unstable_calls(expr: ast.expr, assigned: dict[str, list[ast.expr]]) -> Iterator[str]:
    seen: set[str] = set()
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            if _method(node) == "activity":
                continue  # a recorded activity returns the same value on every replay
            name = dotted_name(node.func)
            if is_unstable(name):
                yield name
        elif isinstance(node, ast.Name) and node.id not in seen:
            seen.add(node.id)
            stack.extend(assigned.get(node.id, ()))
        stack.extend(ast.iter_child_nodes(node))
