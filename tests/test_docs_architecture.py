"""docs/architecture.md's map of the packages names what exists, and leaves nothing of durable/ out.

The rule, as the page states it under "Packages":
- The map is the page's first code block. Each entry is a line that starts, at its first column, with a path
  (`durable/bulk.py`, `durable/runtime/`, `approvals/`), with the indented lines below it; the entry's directory
  is that path's directory. A bare name in the entry (`versions.py`, `sandbox/`) is the file or folder of that
  name in the entry's directory, or in a folder the entry names (`agent.py` of `pydantic_ai/`).
- Every path the page names, in the map or in backquotes anywhere on it (`durable/runtime/executor.py`), exists.
- Every package and module at the top of `durable/` is named, as is every module of `durable/runtime/` and
  `durable/store/`, which the map lists one by one. The engine's modules are described by what they hold, so
  they are not held to their file names (tests/durable/engine/ has one test module per engine module).
"""
from __future__ import annotations

import re

from tests.pages import ROOT

PAGE = ROOT / "docs" / "architecture.md"
LISTED_ONE_BY_ONE = ("durable/runtime", "durable/store")
# A name of a module (`x.py`) or folder (`x/`), maybe with folders before it; not a URL's ("ops/") or a glob's.
NAME = re.compile(r"(?<![\w/.\"'{*-])((?:\w+/)*\w+(?:\.py|/))(?![\w{*])")
QUOTED_PATH = re.compile(r"`((?:durable|approvals|reconciliation)/[\w/.]*?(?:\.py|/))(?:::\w+)?`")
ENTRY = re.compile(r"^(?=(?:durable|approvals|reconciliation)/)", re.MULTILINE)


def the_map(page: str) -> str:
    return page.split("```", 2)[1]


def ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]


def named_in_map(block: str) -> tuple[set[str], list[str]]:
    """(the paths the map names, the names it gives that do not exist), paths relative to the repository."""
    named: set[str] = set()
    missing = []
    for entry in ENTRY.split(block)[1:]:
        first = NAME.match(entry)
        assert first, f"an entry that does not start with a path: {entry[:40]!r}"
        home = first.group(1) if first.group(1).endswith("/") else first.group(1).rsplit("/", 1)[0] + "/"
        folders = [home]
        for name in NAME.findall(entry):
            if name.startswith(("durable/", "approvals/", "reconciliation/")):
                candidates = [name]
            else:
                candidates = [folder + name for folder in folders]
            found = [path for path in candidates if (ROOT / path).exists()]
            if not found:
                missing.append(name)
                continue
            named.update(ancestors(found[0].rstrip("/")))  # durable/management/commands/ names durable/management
            if name.endswith("/"):
                folders.append(found[0])
    return named, missing


def must_be_named() -> set[str]:
    """The top of durable/ (its packages and modules) and the modules of the packages listed one by one."""
    top = {path for path in (ROOT / "durable").iterdir()
           if path.suffix == ".py" or (path / "__init__.py").is_file()}
    listed = {path for folder in LISTED_ONE_BY_ONE for path in (ROOT / folder).glob("*.py")
              if path.name != "__init__.py"}
    return {path.relative_to(ROOT).as_posix() for path in top | listed}


def test_the_map_reads_entries_bare_names_and_subfolders_as_the_rule_says():
    block = ("durable/bulk.py  versions.py (audited)  path(\"ops/\", ...)\n"
             "durable/agents/   pydantic_ai/: DurableAgent (agent.py), errors.py\n"
             "        |  imports down\n"
             "durable/runtime/  what advances runs:\n"
             "    executor.py   claim the lease; durable/notifications/sweeper.py, drill*, gone.py\n")
    named, missing = named_in_map(block)
    assert named == {"durable", "durable/bulk.py", "durable/versions.py", "durable/agents", "durable/agents/pydantic_ai",
                     "durable/notifications",
                     "durable/agents/pydantic_ai/agent.py", "durable/agents/pydantic_ai/errors.py", "durable/runtime",
                     "durable/runtime/executor.py", "durable/notifications/sweeper.py"}
    assert missing == ["gone.py"]


def test_every_module_and_package_the_page_names_exists():
    page = PAGE.read_text()
    _, missing_in_map = named_in_map(the_map(page))
    missing_quoted = sorted({path for path in QUOTED_PATH.findall(page) if not (ROOT / path).exists()})
    assert missing_in_map + missing_quoted == []


def test_the_map_names_every_package_and_module_of_durable_and_of_the_packages_it_lists_one_by_one():
    named, _ = named_in_map(the_map(PAGE.read_text()))
    expected = must_be_named()
    assert len(expected) > 60  # the tree was read: durable/ has some forty modules and packages at its top
    assert sorted(expected - named) == []
