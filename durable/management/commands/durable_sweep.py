"""Run the sweeper once, or every few seconds with --loop (what Celery beat does)."""
from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durable.conf import durable_settings
from durable.runtime import sweeper


class Command(BaseCommand):
    help = ("Settle stale operations, expire approvals, and re-enqueue runs whose lease expired, "
            "whose retry is due, or whose message was lost.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", action="store_true", help="keep sweeping every DURABLE_SWEEP_SECONDS")

    def handle(self, *args: Any, loop: bool, **options: Any) -> None:
        while True:
            self.stdout.write(str(sweeper.sweep_all()))
            if not loop:
                return
            time.sleep(durable_settings.DURABLE_SWEEP_SECONDS)
