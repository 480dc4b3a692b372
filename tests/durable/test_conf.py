"""durable's settings: one place for every default, one accessor, a check that names a wrong one, and the doc in sync."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from durable.checks import check_settings
from durable.conf import DEFAULTS, SETTINGS, durable_settings

DOC = Path(django_settings.BASE_DIR) / "docs" / "configuration.md"
START, END = "<!-- settings table: generated from durable/conf.py by tests/durable/test_conf.py -->", "<!-- end of table -->"
APPS = [Path(django_settings.BASE_DIR) / app for app in ("durable", "approvals", "reconciliation")]


def settings_table() -> str:
    rows = ["| Setting | Default | Meaning |", "|---|---|---|"]
    rows += [f"| `{name}` | `{spec.default!r}` | {spec.meaning} |" for name, spec in SETTINGS.items()]
    return "\n".join(rows)


def test_configuration_doc_lists_every_setting_with_its_default():
    # DURABLE_WRITE_DOCS=1 rewrites the table after a change to durable/conf.py.
    text = DOC.read_text()
    before, rest = text.split(START)
    _, after = rest.split(END)
    expected = f"{before}{START}\n{settings_table()}\n{END}{after}"
    if os.environ.get("DURABLE_WRITE_DOCS"):
        DOC.write_text(expected)
    assert text == expected, "docs/configuration.md is out of date: run DURABLE_WRITE_DOCS=1 pytest " + __file__


def test_every_durable_setting_the_apps_read_has_a_default_and_goes_through_the_accessor():
    read_directly, named = [], set()
    for app in APPS:
        for path in app.rglob("*.py"):
            if "project" in path.relative_to(django_settings.BASE_DIR).parts:
                continue  # the standalone project sets them
            source = path.read_text()
            read_directly += [f"{path}: {m}" for m in re.findall(r"(?<![\w.])settings\.DURABLE_\w+\b(?!\s*=[^=])", source)]
            named |= set(re.findall(r"durable_settings\.(DURABLE_\w+)", source))
    assert read_directly == []
    assert named <= set(DEFAULTS), named - set(DEFAULTS)


def test_a_project_sets_only_what_it_changes():
    with override_settings():
        del django_settings.DURABLE_LEASE_SECONDS
        assert durable_settings.DURABLE_LEASE_SECONDS == DEFAULTS["DURABLE_LEASE_SECONDS"] == 10.0
    with override_settings(DURABLE_LEASE_SECONDS=7):
        assert durable_settings.DURABLE_LEASE_SECONDS == 7
    with pytest.raises(AttributeError, match="not a durable setting"):
        durable_settings.DURABLE_NO_SUCH_THING  # noqa: B018


@pytest.mark.parametrize(("name", "value", "says"), [
    ("DURABLE_LEASE_SECONDS", "60", "must be a number, not str '60'"),
    ("DURABLE_LEASE_SECONDS", -1, "must not be negative"),
    ("DURABLE_BULK_LIMIT", 0, "must be at least 1"),
    ("DURABLE_DELIVER_TWICE", "yes", "must be True or False"),
    ("DURABLE_WORKFLOW_MODULES", "durable.tools.demo.claims_agent", "must be a list of module names"),
    ("DURABLE_LLM_BASE_URL", "localhost:8000", "must be an http(s) URL"),
    ("DURABLE_LLM_PRICES", ["gpt-4o-mini"], "must be a dict of model name"),
    ("DURABLE_LLM_PRICES", {"gpt-4o-mini": {"input": 0.15, "output": "0.60"}}, "must be a decimal string"),
    ("DURABLE_LLM_PRICES", {"gpt-4o-mini": {"input": "0.15"}}, 'must give exactly "input" and "output"'),
    ("DURABLE_LLM_PRICES", {"gpt-4o-mini": {"input": "-1", "output": "0.60"}}, "at least 0"),
    ("DURABLE_LLM_PRICES", {"gpt-4o-mini": {"input": "cheap", "output": "0.60"}}, "must be a decimal number"),
])
def test_a_wrong_setting_is_named_by_the_system_check(settings, name, value, says):
    setattr(settings, name, value)
    [error] = check_settings(settings)
    assert error.id == "durable.E015" and error.obj == name and error.msg.startswith(name) and says in error.msg
    with pytest.raises(SystemCheckError, match=name):
        call_command("check", tags=["durable"])


def test_the_projects_settings_pass_the_check(settings):
    assert check_settings(settings) == []


COUNTS = sorted(name for name, spec in SETTINGS.items() if spec.kind == "count")


@pytest.mark.parametrize("name", COUNTS)
def test_a_count_takes_0_exactly_when_its_meaning_says_what_0_does(settings, name):
    says_what_0_does = "0:" in SETTINGS[name].meaning
    assert SETTINGS[name].zero_turns_off == says_what_0_does
    setattr(settings, name, 0)
    assert bool(check_settings(settings)) != says_what_0_does
    setattr(settings, name, -1)
    [error] = check_settings(settings)
    assert error.obj == name and f"must be at least {0 if says_what_0_does else 1}, not -1" in error.msg
