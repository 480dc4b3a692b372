"""No tracked file carries a merge conflict: a page committed with both sides of one says two things at once.

A conflict is a line that opens one (`<<<<<<< HEAD`), closes one (`>>>>>>> branch`) or starts the merge base's
side (`||||||| base`). A line of seven `=` alone is a conflict's middle only in a file that has one of those:
elsewhere it may be a heading's underline.
"""
from __future__ import annotations

import re

from tests.pages import ROOT, tracked_texts

EDGE = re.compile(r"^(?:<{7}|>{7}|\|{7})(?: .*)?$", re.MULTILINE)
MIDDLE = re.compile(r"^={7}$", re.MULTILINE)


def conflict_lines(text: str) -> list[int]:
    """The lines of a text that are a merge conflict's markers."""
    edges = list(EDGE.finditer(text))
    markers = edges + (list(MIDDLE.finditer(text)) if edges else [])
    return sorted(text.count("\n", 0, match.start()) + 1 for match in markers)


def test_a_conflicts_markers_are_found_and_a_headings_underline_is_not():
    conflicted = "intro\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> waits-proof\n"
    assert conflict_lines(conflicted) == [2, 4, 6]
    assert conflict_lines("a\n<<<<<<< HEAD\nours\n||||||| base\nold\n=======\ntheirs\n>>>>>>> b\n") == [2, 4, 6, 8]
    assert conflict_lines("Title\n=======\n\ntext <<<<<<< inside a line\n") == []


def test_no_tracked_text_file_carries_a_merge_conflict():
    texts = tracked_texts()
    assert any(path.name == "README.md" for path, _ in texts)  # the scan reads the tree, not nothing
    conflicted = [f"{path.relative_to(ROOT)}:{line}" for path, text in texts for line in conflict_lines(text)]
    assert conflicted == []
