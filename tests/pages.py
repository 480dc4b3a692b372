"""The README and docs/ pages, and the code blocks they show: what the docs tests read."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A fenced block: its info string (```python settings.py -> "python settings.py") and its text.
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence
    info: tuple[str, ...]  # the info string's words: the language first, then any marks
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start()) + 1, tuple(m.group(1).split()), m.group(2))
            for m in FENCE.finditer(text)]


def python_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.info[:1] == ("python",)]
