"""Benchmark retention: seed N finished runs with their history (Postgres), prune them, report the rate."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from durable.models import Checkpoint, JournalEntry
from durable.retention import prune
from durable.tools.bench import retention as bench


class Command(BaseCommand):
    help = "Seed N finished runs (3 checkpoints, 3 journal entries each) in Postgres, prune them, report runs/s."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=1_000_000)
        parser.add_argument("--batch", type=int, default=2000)

    def handle(self, *args: Any, runs: int, batch: int, **_: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("the retention benchmark needs Postgres: set DATABASE_URL")
        call_command("migrate", verbosity=0, interactive=False)
        bench.clear()
        started = time.perf_counter()
        bench.seed(runs)
        self.stdout.write(f"seeded {runs:,} finished runs, {3 * runs:,} checkpoints, {3 * runs:,} journal entries "
                          f"in {time.perf_counter() - started:.0f} s")
        try:
            started = time.perf_counter()
            report = prune(timedelta(days=30), batch=batch)
            elapsed = time.perf_counter() - started
            left = Checkpoint.objects.filter(run__workflow_name=bench.PREFIX).count()
            journal = JournalEntry.objects.filter(run__workflow_name=bench.PREFIX).count()
            self.stdout.write(f"{report}\nin {elapsed:.1f} s: {report.runs / elapsed:,.0f} runs/s, "
                              f"{(report.checkpoints + report.journal_entries) / elapsed:,.0f} rows deleted/s; "
                              f"left {left:,} checkpoints (one per run) and {journal:,} journal entries")
        finally:
            bench.clear()
