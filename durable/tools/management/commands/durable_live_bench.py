"""manage.py durable_live_bench: what N open consoles polling their live screens cost a real gunicorn."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durable.conf import durable_settings
from durable.tools.bench import live


class Command(BaseCommand):
    help = "Poll a run's page from N simulated consoles through gunicorn: polls/s, server CPU and queries a poll."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--consoles", type=int, default=50)
        parser.add_argument("--seconds", type=float, default=30.0, help="how long each phase polls")
        parser.add_argument("--interval", type=float, default=durable_settings.DURABLE_CONSOLE_POLL_SECONDS)
        parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers")
        parser.add_argument("--port", type=int, default=8931)

    def handle(self, *args: Any, **options: Any) -> None:
        report = live.run(consoles=options["consoles"], seconds=options["seconds"], interval=options["interval"],
                          workers=options["workers"], port=options["port"])
        for line in report.lines():
            self.stdout.write(line)
