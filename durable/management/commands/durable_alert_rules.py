"""Write the Prometheus alerting rules of the installed durable, for a deployment's rule_files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.alert_rules import RULE_TESTS, RULES


class Command(BaseCommand):
    help = ("Print durable's Prometheus alerting rules (durable-alerts.yml), or with --out DIR write them and "
            "their promtool unit tests there, so a deployment loads the rules of the version it runs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", type=Path, help="a directory to write durable-alerts.yml and "
                                                     "durable-alerts.test.yml into")

    def handle(self, *args: Any, out: Path | None = None, **options: Any) -> None:
        if out is None:
            self.stdout.write(RULES.read_text(), ending="")
            return
        if not out.is_dir():
            raise CommandError(f"--out {out}: no such directory")
        for source in (RULES, RULE_TESTS):
            (out / source.name).write_text(source.read_text())
            self.stdout.write(f"wrote {out / source.name}")
