"""Every link of the README and docs/ to a page of theirs reaches it, and the section it names is still there.

A section that moves to another page (as the benchmarks' history moved to docs/benchmarks-log.md) takes its
links with it, or this fails naming each link left behind.
"""
from __future__ import annotations

import re
from pathlib import Path

from tests.pages import PAGES, ROOT
from tests.test_docs_invariants import anchor

# [text](page.md#section), [text](docs/page.md), [text](#section): links inside the repository's pages.
LINK = re.compile(r"\]\(((?:[\w./-]+\.md)?)(?:#([\w-]+))?\)")


def sections(page: Path) -> set[str]:
    return {anchor(heading) for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)}


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target, section in LINK.findall(page.read_text()):
        if not target and not section:
            continue
        linked = (page.parent / target).resolve() if target else page
        if not linked.is_file() or section and section not in sections(linked):
            broken.append(f"{page.relative_to(root)} -> {target}{'#' + section if section else ''}")
    return broken


def test_a_link_to_a_moved_section_is_found(tmp_path):
    (tmp_path / "reference.md").write_text("# Benchmarks\n\n### Parallel calls: `durable_bench --parallel`\n")
    page = tmp_path / "page.md"
    page.write_text("[a](reference.md#parallel-calls-durable_bench---parallel) [b](reference.md#the-claim) "
                    "[c](gone.md) [d](#benchmarks) [e](https://example.com/x.md#y)\n")
    assert broken_links(page, tmp_path) == [
        "page.md -> reference.md#the-claim", "page.md -> gone.md", "page.md -> #benchmarks"]


def test_every_link_between_the_pages_reaches_a_page_and_a_section_it_has():
    assert len(PAGES) > 20
    assert [link for page in PAGES for link in broken_links(page)] == []
