"""docs/invariants.md states every invariant the code and the docs cite, and what it names exists."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from tests.pages import ROOT, tracked_texts

PAGE = ROOT / "docs" / "invariants.md"
CITING_SUFFIXES = (".py", ".md", ".html", ".txt", ".toml", ".yml", ".yaml", ".cfg")
# The design document the first comments cited is not in the repository: a citation names docs/invariants.md.
ELSEWHERE = re.compile(r"\bDESIGN(?:\.md)?[\s#*]+(?i:invariant)")

# "invariant 9", "invariants 3 and 4", "invariants 3, 4, 6", wrapped over a comment's lines.
CITATION = re.compile(r"\binvariants?\s+(\d+(?:(?:\s*,\s*|\s+and\s+)\d+)*)", re.IGNORECASE)
COMMENT_WRAP = re.compile(r"\n[ \t]*#[ \t]*")
STATED = re.compile(r"^#{2,3} (\d+)\. ", re.MULTILINE)
NAMED_FILE = re.compile(r"`((?:durable|approvals|reconciliation|tests)/[\w/.]+\.py)(?:::(\w+))?`")
LINKED_PAGE = re.compile(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)")


def citations(text: str) -> Iterator[tuple[int, int]]:
    """(line where the citation starts, invariant number) for each invariant the text cites."""
    unwrapped = COMMENT_WRAP.sub(lambda m: " " * len(m.group()), text)  # same length: offsets stay the text's
    for match in CITATION.finditer(unwrapped):
        line = text.count("\n", 0, match.start()) + 1
        for number in re.findall(r"\d+", match.group(1)):
            yield line, int(number)


def citing_texts() -> Iterator[tuple[Path, str]]:
    """Every tracked file of code, docs, templates or configuration, wherever it is in the tree."""
    for path, text in tracked_texts():
        if path.suffix in CITING_SUFFIXES:
            yield path, text


def stated() -> list[int]:
    return [int(n) for n in STATED.findall(PAGE.read_text())]


def anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_citations_are_read_as_written_singly_in_lists_and_across_wrapped_comment_lines():
    text = ("x = 1  # a write fenced by its token (invariant 9)\n"
            '"""Crashes inside a side effect (invariants 3, 4, 6), a deploy (invariants 7 and 8)."""\n'
            "# the sweeper re-sends it instead (invariant\n"
            "#  11). An invariant of the ledger is not a citation.\n")
    assert list(citations(text)) == [(1, 9), (2, 3), (2, 4), (2, 6), (2, 7), (2, 8), (3, 11)]


def test_the_page_states_the_invariants_in_order_from_one():
    assert stated() == list(range(1, 27))  # the design's list, all of it kept by the code


def test_every_invariant_cited_in_the_code_tests_and_docs_is_stated_on_the_page():
    known = set(stated())
    cited = {(path.relative_to(ROOT).as_posix(), line, number)
             for path, text in citing_texts() for line, number in citations(text)}
    assert len({number for _, _, number in cited}) >= 14, "the scan found too few citations to be reading the code"
    assert sorted(c for c in cited if c[2] not in known) == []


def test_a_citation_of_the_design_document_is_caught_wherever_it_is_written():
    cited = ["(DESIGN invariant 9)", "DESIGN invariants 7 and 8", "DESIGN.md invariant 3", "DESIGN\n# invariant 4"]
    assert [bool(ELSEWHERE.search(text)) for text in cited] == [True] * 4
    assert not ELSEWHERE.search("the design's invariant 9, in docs/invariants.md")


def test_no_file_in_the_tree_cites_an_invariant_of_a_design_document_the_repository_does_not_have():
    this_file = Path(__file__).resolve()
    citing = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
              for path, text in tracked_texts() if path.resolve() != this_file
              for match in ELSEWHERE.finditer(text)]
    assert citing == []


def test_every_module_and_test_the_page_names_exists():
    page = PAGE.read_text()
    named = NAMED_FILE.findall(page)
    assert len(named) > 19  # at least one place each invariant is kept or proved
    missing = [f"{path}::{test}" if test else path for path, test in named
               if not (ROOT / path).is_file()
               or test and not re.search(rf"^(?:async )?def {test}\(", (ROOT / path).read_text(), re.MULTILINE)]
    assert missing == []


def test_every_page_the_page_links_exists_with_the_section_it_names():
    broken = []
    for page, section in LINKED_PAGE.findall(PAGE.read_text()):
        target = PAGE.parent / page
        headings = re.findall(r"^#+ (.+)$", target.read_text(), re.MULTILINE) if target.is_file() else None
        if headings is None or section and section not in {anchor(h) for h in headings}:
            broken.append(f"{page}#{section}" if section else page)
    assert broken == []
