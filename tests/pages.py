"""The README and docs/ pages, the code blocks they show, and the tracked files: what the docs tests read."""
from __future__ import annotations

import re
import subprocess
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


def tracked_files() -> list[Path]:
    """Every file git tracks in the checkout, as the repository ships it (a clone's files, not .venv's)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


def tracked_texts() -> list[tuple[Path, str]]:
    """(path, text) of every tracked file that is UTF-8 text; images, fonts and archives are left out."""
    texts = []
    for path in tracked_files():
        try:
            texts.append((path, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue
    return texts


def python_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.info[:1] == ("python",)]
