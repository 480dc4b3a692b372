"""Retention: prune the checkpoints and journal of finished runs; keep the ledger and audit trail."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.conf import durable_settings
from durable.retention import compact_finished, prune


class Command(BaseCommand):
    help = ("Delete all but the last checkpoint, and the journal, of SUCCEEDED and CANCELLED runs that "
            "finished more than N days ago (DURABLE_RETENTION_DAYS). The ledger and audit trail are kept.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-days", type=float, default=None,
                            help="default: DURABLE_RETENTION_DAYS")
        parser.add_argument("--batch", type=int, default=2000, help="runs per transaction")
        parser.add_argument("--checkpoints-only", action="store_true",
                            help="compact each run's checkpoints to its last, keep its journal (and ledger, audit)")

    def handle(self, *args: Any, older_than_days: float | None, batch: int, checkpoints_only: bool = False,
               **_: Any) -> None:
        days = durable_settings.DURABLE_RETENTION_DAYS if older_than_days is None else older_than_days
        if days < 0 or (not days and not (checkpoints_only and older_than_days is not None)):
            raise CommandError("say how old a finished run must be: --older-than-days N or DURABLE_RETENTION_DAYS")
        if batch < 1:
            raise CommandError("--batch must be at least 1")
        started = time.perf_counter()
        report = (compact_finished if checkpoints_only else prune)(timedelta(days=days), batch=batch)
        elapsed = time.perf_counter() - started
        rate = report.runs / elapsed if elapsed else 0.0
        self.stdout.write(f"{report} in {elapsed:.1f} s ({rate:,.0f} runs/s)")
