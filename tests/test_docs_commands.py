"""Every `manage.py` command line the README and docs/ show is one this project has, with options it takes.

What each command does is tested beside its code (tests/durable/test_commands.py, test_drill.py,
test_deploy_gate.py, test_tokens_command.py, ...); this keeps the pages true to those commands: a
renamed command or option fails here, not in a reader's terminal.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import get_commands, load_command_class
from django.test import Client

from durable.engine.states import RunStatus
from durable.models import Run
from durable.tools.demo import commands
from durable.tools.demo.setup import ensure_demo_people
from tests.durable.claims import advance
from tests.pages import FENCE, PAGES
from tests.pages import blocks as page_blocks

SPAN = re.compile(r"`((?:[^`\n]|\n(?![ \t]*\n))+)`")  # a code span may wrap over lines, never over a blank one
COMMAND = re.compile(r"manage\.py\s+(.+)")
# What a page writes where the reader fills in a value: N, R, <token>, ...
PLACEHOLDER = re.compile(r"^(?:[A-Z]|<[^>]+>|\.\.\.|[A-Z]+_[A-Z_]+)$")


def shown_command_lines() -> list[tuple[str, str]]:
    """(page, the command line after `manage.py`) for every command a page shows in code."""
    found = []
    for page in PAGES:
        text = page.read_text()
        blocks = [line for block in page_blocks(page) for line in block.text.splitlines()]
        comments = [span for line in blocks if line.lstrip().startswith("#") for span in SPAN.findall(line)]
        spans = SPAN.findall(FENCE.sub("", text))
        code = [line for line in blocks if not line.lstrip().startswith("#")]
        for line in code + comments + [" ".join(span.split()) for span in spans]:
            match = COMMAND.search(line.split(" # ")[0].split("  #")[0])
            if match and not match.group(1).startswith("..."):  # "manage.py ...": any command
                found.append((page.name, match.group(1).strip().rstrip("\\").strip()))
    return found


def arguments(line: str) -> tuple[str, list[str]]:
    """The command's name and its arguments, with optional parts taken and placeholders given a value."""
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("|", " "))
    name, rest = words[0], words[1:]
    return name, ["1" if PLACEHOLDER.match(word) else word for word in rest]


LINES = shown_command_lines()


def test_every_command_a_page_names_is_among_the_lines_checked():
    """The lines above are found by reading code blocks and spans; a command named in any other shape (a span
    wrapped over two lines, a remark in a code block) would go unchecked. Every `manage.py <command>` in a page's
    text, read here without regard to code, must be among them."""
    named = {(page.name, name) for page in PAGES for name in re.findall(r"manage\.py\s+([a-z][a-z_]*)", page.read_text())}
    checked = {(page, arguments(line)[0]) for page, line in LINES}
    assert ("fault-drill.md", "durable_drill") in named  # the wide net catches what it must
    assert sorted(named - checked) == []


@pytest.mark.parametrize("page,line", LINES, ids=[f"{page}: {line[:60]}" for page, line in LINES])
def test_each_command_line_shown_names_a_command_and_options_it_takes(page, line):
    name, args = arguments(line)
    commands = get_commands()
    assert name in commands, f"{page} shows `manage.py {name}`, which no installed app provides"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    try:
        parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{page} shows `manage.py {line}`, which `{name}` does not take ({args})")


# The demo's ready commands: the README shows them as bin/demo prints them, and they start runs.

README = (Path(settings.BASE_DIR) / "README.md").read_text()
DEMO_URL = "http://127.0.0.1:8000/"


def test_the_readme_shows_the_demo_commands_as_bin_demo_prints_them():
    assert f"{commands.token_command('<the token bin/demo printed>')}\n" in README
    for order_id in commands.CLAIMS:
        assert f"{commands.start_command(DEMO_URL, order_id)}\n" in README, order_id
    for order_id in set(commands.SUPPORT) - {commands.SUPPORT_EXAMPLE}:
        assert f"{commands.support_command(DEMO_URL, order_id)}\n" in README, order_id
    for order_id in commands.REPLY:
        assert f"{commands.reply_command(DEMO_URL, order_id)}\n" in README, order_id


@pytest.mark.django_db
@pytest.mark.parametrize("order_id", list(commands.CLAIMS))
def test_each_ready_demo_command_starts_a_run_that_waits_for_approval(demo, order_id):
    run = started_by(commands.start_command(DEMO_URL, order_id))
    assert run.business_key == order_id and run.status == RunStatus.WAITING_APPROVAL


@pytest.mark.django_db
@pytest.mark.parametrize("order_id,status", [("ORD-1003", RunStatus.SUCCEEDED), ("ORD-1001", RunStatus.SUCCEEDED),
                                             ("ORD-1004", RunStatus.WAITING_APPROVAL),
                                             ("ORD-1005", RunStatus.WAITING)])
def test_each_support_agent_command_starts_a_run_that_answers_or_asks_for_its_refund(demo, order_id, status):
    run = started_by(commands.support_command(DEMO_URL, order_id))
    assert (run.workflow_name, run.business_key, run.status) == ("support-agent", order_id, status), run.error
    assert run.status != RunStatus.SUCCEEDED or run.output["refund_id"] is None  # a question; an injection refused


@pytest.mark.django_db
@pytest.mark.parametrize("order_id", list(commands.REPLY))
def test_the_ready_reply_wakes_the_run_waiting_for_it_and_sent_again_is_one_event(demo, order_id):
    run = started_by(commands.support_command(DEMO_URL, order_id))
    assert run.status == RunStatus.WAITING and run.waiting_for["events"] == ["customer_reply"]
    first, again = posted(commands.reply_command(DEMO_URL, order_id)), posted(commands.reply_command(DEMO_URL, order_id))
    assert (first.status_code, again.status_code) == (201, 200), (first.content, again.content)
    assert first.json()["id"] == again.json()["id"] and first.json()["woke_run"]
    run = advance(run)
    assert run.status == RunStatus.WAITING and run.waiting_for["kind"] == "child"  # the fraud check, next


def posted(command: str):
    """A ready command POSTed as curl would send it, with intake's token."""
    people = ensure_demo_people()
    words = shlex.split(command.replace(f"${commands.TOKEN_VARIABLE}", people.intake_token))
    headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
    extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()
             if name not in ("Content-Type",)}
    body = words[words.index("-d") + 1]
    return Client().post(urlsplit(words[words.index("-X") + 2]).path, body, content_type=headers["Content-Type"],
                         **extra)


def started_by(command: str) -> Run:
    """The run a ready command starts, POSTed as curl would with intake's token, advanced in this process."""
    response = posted(command)
    assert response.status_code == 201, response.content
    return advance(Run.objects.get(id=response.json()["id"]))
