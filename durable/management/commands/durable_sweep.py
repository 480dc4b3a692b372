"""Run the sweeper once, or every few seconds with --loop (what Celery beat does)."""
from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from durable import sweeper
from reconciliation.sweeper import reconcile_stale


class Command(BaseCommand):
    help = "Re-enqueue runs whose lease expired, whose retry is due, or whose message was lost."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", action="store_true", help="keep sweeping every DURABLE_SWEEP_SECONDS")

    def handle(self, *args: Any, loop: bool, **options: Any) -> None:
        while True:
            settled = reconcile_stale()
            ids = sweeper.sweep()
            self.stdout.write(f"reconciled {settled} stale operation(s), re-enqueued {len(ids)} run(s)")
            if not loop:
                return
            time.sleep(settings.DURABLE_SWEEP_SECONDS)
