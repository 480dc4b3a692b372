"""The words docs/architecture.md pins ("Words that mean one thing") mean one thing on the console's screens too.

- A visit's number is the seq of the checkpoint it started from (the API's `visit`); which visit of its step
  it is, the console writes with the step's name (`act #3`). So no screen says "visit #3".
- "Token" alone is none of the three: a screen says which, an API token, LLM tokens (a model call's), a
  fencing token (a lease's), or the metrics token; Django's CSRF token keeps its name.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pages import ROOT

PAGE = ROOT / "docs" / "architecture.md"
WORDS = ("visit", "visit number", "fencing token", "API token", "metrics token", "LLM tokens")
TEMPLATES = sorted(path for app in ("durable", "approvals", "reconciliation")
                   for path in (ROOT / app / "templates").rglob("*.html"))
CONSOLE_CODE = sorted(path for folder in ("durable/console", "approvals", "reconciliation")
                      for path in (ROOT / folder).rglob("*.py") if "migrations" not in path.parts)
VISIT_BY_NUMBER = re.compile(r"\bvisit #(?:\d|\{)", re.IGNORECASE)
# What a reader does not see: template tags, comments, code and preformatted text, the tags. A variable shows a value.
UNSEEN = re.compile(r"\{%.*?%\}|\{#.*?#\}|<(code|pre)\b.*?</\1>|<[^>]*>", re.DOTALL)
VARIABLE = re.compile(r"\{\{.*?\}\}", re.DOTALL)
TOKEN = re.compile(r"(\S+)\s+tokens?\b|^\s*tokens?\b", re.IGNORECASE | re.MULTILINE)
SAYS_WHICH = {"api", "llm", "fencing", "metrics", "csrf", "input", "output"}  # "Input LLM tokens" has LLM before


def seen_text(template: str) -> str:
    return VARIABLE.sub("1", UNSEEN.sub(" ", template))


def unqualified_tokens(text: str) -> list[str]:
    """Each "token" or "tokens" the text does not say the kind of (the word before it names none)."""
    found = []
    for match in TOKEN.finditer(text):
        before = (match.group(1) or "").lower().strip("“”\"'(")
        if before.removesuffix("-") not in SAYS_WHICH and not before.endswith(("llm-", "api-")):
            found.append(match.group(0).strip())
    return found


def glossary() -> str:
    text = PAGE.read_text()
    return text.split("## Words that mean one thing", 1)[1].split("\n## ", 1)[0]


def test_the_glossary_pins_each_word():
    rows = re.findall(r"^\| \*\*([^*]+)\*\*", glossary(), re.MULTILINE)
    assert [row.split(" (")[0] for row in rows] == list(WORDS)


def test_a_screens_text_is_read_as_a_person_sees_it():
    shown = seen_text('<p class="api-tokens">{% if t %}Your tokens{% endif %} <code>Token &lt;token&gt;</code>'
                      "{{ n }} LLM tokens, cost</p><th>Input LLM tokens</th> API token “x” visit #{{ n }}")
    assert unqualified_tokens(shown) == ["Your tokens"]  # "1 LLM tokens" says which
    assert VISIT_BY_NUMBER.search(shown)
    assert not VISIT_BY_NUMBER.search("already done in pay #1; 3 visits finished, act #2 under way")


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_screen_says_which_token_and_numbers_no_visit(template: Path):
    shown = seen_text(template.read_text())
    assert unqualified_tokens(shown) == []
    assert VISIT_BY_NUMBER.findall(shown) == []


def test_the_consoles_code_numbers_no_visit():
    assert len(CONSOLE_CODE) > 30
    numbered = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
                for path in CONSOLE_CODE for text in [path.read_text()] for match in VISIT_BY_NUMBER.finditer(text)]
    assert numbered == []
