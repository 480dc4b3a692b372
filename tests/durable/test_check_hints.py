"""The launch checks' hints give commands that run where the check ran: W011's drill command is the standalone
project's as it is, and in a host project (no durable.tools) carries the drill's settings and a target
(docs/fault-drill.md); no hint names a command a host does not have (tests/durable/test_checks.py checks W011 in a
host's INSTALLED_APPS)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from pydantic import BaseModel

import durable.checks
from durable import Workflow
from durable.checks import drill_command

ROOT = Path(settings.BASE_DIR)
CHECK_MODULES = [path for app in ("durable", "approvals", "reconciliation") for path in (ROOT / app).rglob("checks.py")
                 if "tools" not in path.parts]
NAMED_COMMAND = re.compile(r"manage\.py (\w+)")


class Order(BaseModel):
    order_id: str = ""


refund = Workflow(name="shop-refund", version=2, state=Order, input=Order)  # never registered


def test_the_standalone_project_runs_the_drill_as_it_is():
    assert drill_command(refund, ["refund", "notify"], host=False) == (
        "python manage.py durable_drill --workflow shop-refund --workflow-version 2 --actions notify,refund")


def test_a_host_project_runs_the_drill_under_the_drills_settings_with_its_target():
    command = drill_command(refund, ["refund"], host=True)
    assert command.startswith(f"DURABLE_DRILL_SETTINGS={settings.SETTINGS_MODULE} python manage.py durable_drill "
                              "--workflow shop-refund --workflow-version 2 --actions refund ")
    assert "--settings durable.tools.drill_settings --target " in command


def commands_of(path: Path) -> set[str]:
    return {command.stem for command in path.glob("management/commands/*.py") if not command.stem.startswith("_")}


def test_no_check_hint_names_a_command_a_host_project_does_not_have():
    """Every `manage.py <command>` a check's text names is Django's or ships with the apps a host installs; the
    drill, the one tool a check asks for, is named only by drill_command, which gives a host its own form of it."""
    tools = commands_of(ROOT / "durable" / "tools")
    hosts_have = {name for name, app in get_commands().items() if app != "durable.tools"}
    named = {command for path in CHECK_MODULES for command in NAMED_COMMAND.findall(path.read_text())}
    assert {"durable_drill", "durable_sweep", "durable_versions"} <= named
    assert named - tools <= hosts_have, named - tools - hosts_have
    assert named & tools == {"durable_drill"}
    source = Path(inspect.getsourcefile(durable.checks) or "").read_text()
    assert source.count("manage.py durable_drill") == 1 and "manage.py durable_drill" in inspect.getsource(drill_command)
