"""What a step's own source says about its side effects and approvals, read with `ast` before launch.

The launch checks (durable/checks.py) use it to see, without running anything, whether every
`ctx.side_effect(...)` names a business key that is the same on every re-execution, and
whether every `ctx.request_approval(...)` declares its revalidation and expiry. It reads only
the step function's body: calls made inside helper functions it calls are not seen. It reads the guards a call
sits under (`if ctx.workflow_version >= 2:`, `if ctx.patched("name"):`), so a step shared by several versions is
checked, for each, on the calls that can run there.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
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


@dataclass(frozen=True, order=True)
class Suspect:
    """A random or time-based call that may reach a business key, and the line it is on."""

    call: str  # its dotted name, `timezone.now`
    line: int  # in the step's source file


_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Guard:
    """An `if` a call sits under that durable can read: `ctx.workflow_version >= 2` or `ctx.patched("name")`, on the
    branch the call is in (`holds` False: the else branch, or under `not`)."""

    kind: str  # "version" or "patch"
    holds: bool
    op: str = ""  # a version guard's comparison, with the version on its left: ">=", "==", ...
    value: int = 0  # ...and the number it compares with
    patch: str = ""  # a patch guard's name

    def allows_version(self, version: int) -> bool:
        """Can the call run on `version`? A patch guard may go either way; a version guard is decided here."""
        if self.kind != "version":
            return True
        outcome = {"==": version == self.value, "!=": version != self.value, "<": version < self.value,
                   "<=": version <= self.value, ">": version > self.value, ">=": version >= self.value}[self.op]
        return outcome == self.holds


@dataclass(frozen=True)
class Call:
    """One `*.side_effect(...)` or `*.request_approval(...)` call in a step's body."""

    kind: str  # SIDE_EFFECT or REQUEST_APPROVAL
    line: int  # in the step's source file
    keywords: dict[str, ast.expr]  # the arguments passed by name
    passes_kwargs: bool  # `**options`: what it holds cannot be read
    first: str | None  # the first positional argument when it is a string literal (action or kind)
    unstable: tuple[str, ...]  # random or time-based calls that certainly feed `business_key`
    suspects: tuple[Suspect, ...] = ()  # calls that may feed it, on some path only (when none is certain)
    guards: tuple[Guard, ...] = ()  # the version and patch guards it sits under, outermost first

    def allows_version(self, version: int) -> bool:
        return all(guard.allows_version(version) for guard in self.guards)

    @property
    def patches(self) -> tuple[str, ...]:
        """The patches whose new branch the call is on (`if ctx.patched("name"):`)."""
        return tuple(guard.patch for guard in self.guards if guard.kind == "patch" and guard.holds)

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

    def for_version(self, version: int) -> StepSource:
        """The calls that can run on `version`: one under `if ctx.workflow_version >= 2:` is not checked against v1,
        so versions can share a step's code (docs/workflow-versions.md, "Patches")."""
        return StepSource(self.filename, tuple(call for call in self.calls if call.allows_version(version)))


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
    bindings = _bindings(body)
    offset = max(first_line, 1) - 1
    guards = _guards(body)
    calls = tuple(replace(_call(node, bindings, offset), guards=guards.get(id(node), ())) for node in ast.walk(body)
                  if isinstance(node, ast.Call) and _method(node) in (SIDE_EFFECT, REQUEST_APPROVAL))
    return StepSource(filename, calls)


def _guards(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, tuple[Guard, ...]]:
    """For each node under an `if` that tests the workflow version or a patch, those guards (by the node's id)."""
    found: dict[int, tuple[Guard, ...]] = {}

    def visit(node: ast.AST, above: tuple[Guard, ...]) -> None:
        if isinstance(node, ast.If):
            guard = _guard(node.test)
            visit(node.test, above)
            for branch, holds in ((node.body, True), (node.orelse, False)):
                inside = above + ((replace(guard, holds=guard.holds == holds),) if guard else ())
                for statement in branch:
                    visit(statement, inside)
            return
        if above:
            found[id(node)] = above
        for child in ast.iter_child_nodes(node):
            visit(child, above)

    for statement in fn.body:
        visit(statement, ())
    return found


def _guard(test: ast.expr) -> Guard | None:
    """`ctx.workflow_version >= 2`, `2 <= ctx.workflow_version`, `ctx.patched("name")`, or `not` one of them."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _guard(test.operand)
        return replace(inner, holds=not inner.holds) if inner else None
    if isinstance(test, ast.Call) and _method(test) == "patched" and test.args:
        name = test.args[0]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return Guard("patch", True, patch=name.value)
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARE:
        op, left, right = _COMPARE[type(test.ops[0])], test.left, test.comparators[0]
        if _is_version(right) and _is_number(left):
            op, left, right = _FLIPPED[op], right, left
        if _is_version(left) and _is_number(right):
            return Guard("version", True, op=op, value=right.value)  # type: ignore[attr-defined]  # a Constant int
    return None


def _is_version(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "workflow_version"


def _is_number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


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


def _call(node: ast.Call, bindings: Bindings, offset: int) -> Call:
    keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    first = node.args[0] if node.args else keywords.get("action") or keywords.get("kind")
    literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
    key = keywords.get("business_key")
    certain: set[str] = set()
    suspects: set[Suspect] = set()
    for name, line, sure in (_unstable_calls(key, bindings) if key is not None else ()):
        if sure:
            certain.add(name)
        else:
            suspects.add(Suspect(name, line + offset))
    return Call(_method(node), node.lineno + offset, keywords, any(kw.arg is None for kw in node.keywords),
                literal, tuple(sorted(certain)), () if certain else tuple(sorted(suspects)))


# -- what each local name may hold ---------------------------------------------------
#
# A name's bindings are every place the step's body gives it a value. A binding is `exact` when the
# name takes exactly that value (`key = ...`, `(key := ...)`, one element of `a, b = x, y`); it is
# inexact when the name takes a part of the value or the value changes part of what the name holds:
# a loop or comprehension variable (an element of its iterable), unpacking that cannot be matched
# element by element, `key += ...`, `results[k] = ...` and `results.append(...)` (a mutation of
# `results`, never a binding of `k`), `with ... as f`. Only an attribute path is bound by
# `state.key = ...`, never the name `state`.

_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add"})


@dataclass(frozen=True)
class Binding:
    value: ast.expr | None  # None: a parameter of the step, whose value comes from the caller
    exact: bool


Bindings = dict[str, list[Binding]]


def _bindings(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Bindings:
    """Every value each local name (or attribute path, `state.key`) may be given in the step's body."""
    bindings: Bindings = {}

    def bind(target: ast.AST, value: ast.expr | None, exact: bool) -> None:
        for name, part, part_exact in _targets(target, value, exact):
            bindings.setdefault(name, []).append(Binding(part, part_exact))

    every_argument = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg]
    for argument in every_argument:
        if argument is not None:
            bindings.setdefault(argument.arg, []).append(Binding(None, True))
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value, True)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            bind(node.target, node.value, True)
        elif isinstance(node, ast.AugAssign):
            bind(node.target, node.value, False)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bind(node.target, node.iter, False)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bind(node.optional_vars, node.context_expr, False)
        elif isinstance(node, ast.Call) and _method(node) in _MUTATORS:
            for passed in [*node.args, *(kw.value for kw in node.keywords)]:
                bind(node.func.value, passed, False)  # type: ignore[attr-defined]  # _method saw an Attribute
    return bindings


def _targets(target: ast.AST, value: ast.expr | None, exact: bool) -> Iterator[tuple[str, ast.expr | None, bool]]:
    """The names (and attribute paths) an assignment target binds, each with the part of `value` it takes."""
    if isinstance(target, ast.Name):
        yield target.id, value, exact
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value, value, False)
    elif isinstance(target, (ast.Tuple, ast.List)):
        elements = target.elts
        matched = (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements)
                   and not any(isinstance(e, ast.Starred) for e in [*elements, *value.elts]))
        for index, element in enumerate(elements):
            if matched:
                yield from _targets(element, value.elts[index], exact)  # type: ignore[union-attr]
            else:
                yield from _targets(element, value, False)
    elif isinstance(target, ast.Attribute):
        path = dotted_name(target)
        if path:
            yield path, value, False  # an attribute may also hold what an earlier step or visit put there
    elif isinstance(target, ast.Subscript):
        # `results[c["id"]] = ...` changes what `results` holds; it gives `c` no value.
        yield from _targets(target.value, value, False)


def _unstable_calls(expr: ast.expr, bindings: Bindings) -> Iterator[tuple[str, int, bool]]:
    """The random or time-based calls whose result may reach `expr`: (name, line, certain).

    Certain means the value reaches the key on every path: the call is in the key's own expression, or
    in the only, exact binding of each name the key is built from (a second binding anywhere in the step
    makes the name's value depend on the path taken). A call that reaches the key only through a branch
    (`a if c else b`, `a or b`), a loop, a mutation or an attribute is a suspect, not a certainty.
    """
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[ast.AST, bool]] = [(expr, True)]
    while stack:
        node, certain = stack.pop()
        if (id(node), certain) in seen:
            continue
        seen.add((id(node), certain))
        if isinstance(node, ast.Call):
            if _method(node) == "activity":
                continue  # a recorded activity returns the same value on every replay
            name = dotted_name(node.func)
            if is_unstable(name):
                yield name, node.lineno, certain
        elif isinstance(node, ast.Name):
            found = bindings.get(node.id, [])
            stack.extend((b.value, certain and b.exact and len(found) == 1) for b in found if b.value is not None)
        elif isinstance(node, ast.Attribute):
            stack.extend((b.value, False) for b in bindings.get(dotted_name(node), []) if b.value is not None)
        branches = isinstance(node, (ast.IfExp, ast.BoolOp, ast.Compare, ast.Lambda, ast.ListComp, ast.SetComp,
                                     ast.DictComp, ast.GeneratorExp))
        stack.extend((child, certain and not branches) for child in ast.iter_child_nodes(node))
