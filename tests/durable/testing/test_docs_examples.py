"""docs/testing.md's examples, run as written: the page's Python blocks are this module's code, so pytest collects
the `test_` functions they define (with their fixtures and parameters) as tests of this module."""
from __future__ import annotations

from tests.pages import ROOT, blocks

PAGE = ROOT / "docs" / "testing.md"
EXAMPLES = [block for block in blocks(PAGE) if block.info[:1] == ("python",)]

for _block in EXAMPLES:
    # Padded to the block's line, so a failing example's traceback names its line on the page.
    exec(compile("\n" * _block.line + _block.text, str(PAGE), "exec"), globals())


def test_the_page_shows_tests_of_every_part_of_the_kit():
    shown = "".join(block.text for block in EXAMPLES)
    for part in ("pytest_plugins", ".advance()", ".approve(", "clock.move(", "send_event(", "stand_in(",
                 "crash_at(", ".ledger()", ".journal(", ".timeline()"):
        assert part in shown, f"docs/testing.md shows no example of {part}"
