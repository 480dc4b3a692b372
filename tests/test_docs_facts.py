"""Facts the README and docs/ repeat are held to the one place that decides them.

- A `DURABLE_*` setting's default is durable/conf.py's. Wherever a page quotes one ("`DURABLE_X` (5 s)",
  "(default 90)", "(500 by default)", "(`DURABLE_X`, 24)", a table row "| `DURABLE_X` | `3600` |"), it must be
  that default. Tables of the standalone project's environment (first column "Variable") are left out: there
  the standalone project's own values are given (its DURABLE_QUEUE is `durable`), and they say so.
- The operation id's formula is durable/engine/ids.py's OPERATION_ID_FORMULA, which operation_id() computes.
"""
from __future__ import annotations

import hashlib
import inspect
import re

import pytest

from durable.conf import SETTINGS
from durable.engine.ids import OPERATION_ID_FORMULA, operation_id
from tests.pages import PAGES, ROOT

NAME = r"`(DURABLE_[A-Z0-9_]+)`"
QUOTES = [
    re.compile(NAME + r"(?: [a-z]+)?,? \(([^()]*)\)"),  # `X` (5 s), `X` days (default 90)
    re.compile(r"\(" + NAME + r",\s*([^()]*)\)"),  # (`X`, 24)
    re.compile(NAME + r"[^.(\n]{0,30}?\(([^()]*by default[^()]*)\)"),  # `X` runs (500 by default)
    re.compile(r"^\|\s*" + NAME + r"\s*\|\s*`([^`]*)`\s*\|", re.M),  # | `X` | `3600` | (the settings' tables)
]
UNITS = {"s": 1, "min": 60, "h": 3600}
VALUE = re.compile(r"(-?\d+(?:\.\d+)?)(?: ?(s|min|h|days?))?|on|off|''|\[\]|None|True|False|'[^']*'")
ENVIRONMENT_TABLE = re.compile(r"^\| *[Vv]ariable *\|.*?(?=\n\n|\Z)", re.S | re.M)


def quoted_value(text: str) -> str | None:
    """The value a parenthesis or table cell gives, or None when it gives none (a reference, a remark)."""
    says_default = "default" in text
    if "by default" in text:
        text = text.split("by default")[0]
    elif says_default:
        text = text.split("default", 1)[1]
    text = re.split(r"[,;]", text)[0].strip(" :")
    if re.fullmatch(r"`[^`]+`", text):
        text = text.strip("`")
        if says_default and not VALUE.fullmatch(text):
            return repr(text)  # "default `var/metrics`": a value given as text
    return text if VALUE.fullmatch(text) else None


def parsed(value: str, name: str) -> object:
    """The quoted value as Python, in the setting's own unit (seconds for *_SECONDS)."""
    literal = {"on": True, "off": False, "''": "", "[]": [], "None": None, "True": True, "False": False}
    if value in literal:
        return literal[value]
    if value.startswith("'"):
        return value.strip("'")
    number, unit = VALUE.fullmatch(value).group(1, 2)  # type: ignore[union-attr]
    return float(number) * (UNITS.get(unit, 1) if name.endswith("_SECONDS") else 1)


def quoted_defaults() -> list[tuple[str, str, str]]:
    """(where, setting, value) for every default of a durable setting a page quotes."""
    found = set()
    for page in PAGES:
        text = ENVIRONMENT_TABLE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
        for pattern in QUOTES:
            for match in pattern.finditer(text):
                name, value = match.group(1), quoted_value(match.group(2))
                if name in SETTINGS and value is not None:
                    line = text.count("\n", 0, match.start()) + 1
                    found.add((f"{page.relative_to(ROOT)}:{line}", name, value))
    return sorted(found)


DEFAULTS = quoted_defaults()


def test_the_pages_quote_defaults_outside_the_generated_table():
    assert len({where.split(":")[0] for where, _, _ in DEFAULTS} - {"docs/configuration.md"}) >= 4


@pytest.mark.parametrize("where, name, value", DEFAULTS)
def test_every_quoted_default_is_the_one_in_durable_conf(where, name, value):
    default = SETTINGS[name].default
    shown = parsed(value, name)
    assert shown == default or (isinstance(default, float) and shown == float(default)), (
        f"{where}: {name}'s default is quoted as {value!r}; durable/conf.py says {default!r}")


FORMULA = re.compile(r'sha256\("([a-z_:]+)"\)\[:(\d+)\]')


def test_operation_id_computes_the_formula_it_is_documented_by():
    fields, length = FORMULA.fullmatch(OPERATION_ID_FORMULA).groups()  # type: ignore[union-attr]
    assert fields.split(":") == list(inspect.signature(operation_id).parameters)
    values = {"run_id": "0b4c-run", "action": "refund", "business_key": "ORD-1"}
    expected = hashlib.sha256(":".join(values[f] for f in fields.split(":")).encode()).hexdigest()[:int(length)]
    assert operation_id(**values) == expected


def sources() -> list:
    return [*PAGES, *sorted((ROOT / "durable").rglob("*.py"))]


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_page_and_docstring_quotes_the_operation_id_formula_as_it_is(path):
    for match in FORMULA.finditer(path.read_text()):
        assert match.group(0) == OPERATION_ID_FORMULA, f"{path.relative_to(ROOT)} writes {match.group(0)}"


def test_the_readme_quotes_the_formula():
    assert OPERATION_ID_FORMULA in (ROOT / "README.md").read_text()


# -- every launch warning says where the docs explain what to do ----------------------

DOCS_REFERENCE = re.compile(r"docs/([a-z0-9-]+\.md)(?:#([a-z0-9-]+))?")
CHECK_MODULES = ["durable/checks.py", "approvals/checks.py", "durable/notifications/checks.py"]


def anchors(page: str) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / page).read_text(), re.M)
    return {re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-") for heading in headings}


def warnings_and_their_references() -> list[tuple[str, list[tuple[str, str]]]]:
    """(check id, the docs pages and anchors named in the function that builds it) for every Warning."""
    import ast

    found = []
    for module in CHECK_MODULES:
        tree = ast.parse((ROOT / module).read_text())
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            texts = " ".join(n.value for n in ast.walk(function)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str))
            for call in ast.walk(function):
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Warning":
                    [check_id] = [kw.value.value for kw in call.keywords if kw.arg == "id"]  # type: ignore[attr-defined]
                    found.append((check_id, DOCS_REFERENCE.findall(texts)))
    return found


WARNINGS = warnings_and_their_references()


def test_the_check_modules_build_warnings():
    assert {"durable.W001", "durable.W003", "durable.W010", "durable.W011"} <= {check for check, _ in WARNINGS}


@pytest.mark.parametrize("check, references", WARNINGS, ids=[check for check, _ in WARNINGS])
def test_every_warning_points_at_a_docs_section_that_names_it(check, references):
    assert references, f"{check}'s hint names no docs page"
    for page, anchor in references:
        assert (ROOT / "docs" / page).exists(), f"{check} points at docs/{page}, which does not exist"
        assert not anchor or anchor in anchors(page), f"{check} points at docs/{page}#{anchor}: no such heading"
        assert check in (ROOT / "docs" / page).read_text(), f"docs/{page} does not say what to do about {check}"


CHECK_ID = re.compile(r"durable\.[EWI]\d{3}")


def test_the_docs_name_every_check_the_apps_raise_and_no_other():
    production = [path for app in ("durable", "approvals", "reconciliation") for path in (ROOT / app).rglob("*.py")
                  if "tools" not in path.relative_to(ROOT).parts]
    raised = {match for path in production for match in re.findall(r'id="(durable\.[EWI]\d{3})"', path.read_text())}
    documented = {match for page in PAGES for match in CHECK_ID.findall(page.read_text())}
    assert raised and raised == documented, (f"raised, never documented: {sorted(raised - documented)}; "
                                             f"documented, never raised: {sorted(documented - raised)}")
