"""Benchmark the console's busiest pages on a big database (Postgres)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from durable.tools.bench import console
from durable.roles import VIEWER, ensure_roles

BUDGET_MS = 100.0
BENCH_USER = "bench-console-viewer"


def pages() -> list[tuple[str, str, str]]:
    """(name, url, a marker that appears once per listed row)."""
    wf, with_approvals = f"{console.PREFIX}2", f"{console.PREFIX}0"  # seed() asks approvals of every 100th run
    day = (timezone.now() - timedelta(days=2)).date()
    return [
        ("runs, first page", "/runs/", 'class="run-row"'),
        ("runs, status=FAILED", "/runs/?status=FAILED", 'class="run-row"'),
        ("runs, workflow+version+status", f"/runs/?workflow={wf}&version=3&status=FAILED", 'class="run-row"'),
        ("runs, business key", "/runs/?business_key=ORD-123457", 'class="run-row"'),
        ("runs, created in one day", f"/runs/?created_after={day}&created_before={day + timedelta(days=1)}",
         'class="run-row"'),
        ("approvals inbox", "/approvals/", 'class="approval-row"'),
        ("approvals inbox, workflow+kind", f"/approvals/?workflow={with_approvals}&kind=refund", 'class="approval-row"'),
        ("overview", "/", "<td"),
    ]


class Command(BaseCommand):
    help = ("Seed N runs and M pending approvals (Postgres), then time the console's runs list, approvals "
            "inbox and overview in-process: p50/p95/max server time per page.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=1_000_000)
        parser.add_argument("--approvals", type=int, default=10_000)
        parser.add_argument("--repeat", type=int, default=50, help="requests per page, after one warm-up")
        parser.add_argument("--reuse", action="store_true", help="time the rows an earlier --keep left; seed nothing")
        parser.add_argument("--keep", action="store_true", help="leave the seeded rows for a later --reuse")

    def handle(self, *args: Any, runs: int, approvals: int, repeat: int, reuse: bool, keep: bool, **_: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("the console benchmark needs Postgres: set DATABASE_URL")
        call_command("migrate", verbosity=0, interactive=False)
        if not reuse:
            console.clear()
            self.stdout.write(f"seeding {runs:,} runs and {approvals:,} pending approvals...")
            console.seed(runs, approvals)
        try:
            self._report(repeat)
        finally:
            if not keep:
                console.clear()
                User.objects.filter(username=BENCH_USER).delete()

    def _report(self, repeat: int) -> None:
        client = Client()
        client.force_login(self._viewer())
        self.stdout.write(f"\n{'page':34} {'rows':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  budget")
        with override_settings(DEBUG=False):
            for name, url, marker in pages():
                t = console.time_page(client, name, url, repeat, marker)
                verdict = "ok" if t.p95_ms < BUDGET_MS else f"OVER {BUDGET_MS:.0f} ms"
                self.stdout.write(f"{t.name:34} {t.rows:>5} {t.p50_ms:>8.1f} {t.p95_ms:>8.1f} {t.max_ms:>8.1f}  {verdict}")

    def _viewer(self) -> User:
        ensure_roles()
        user, _ = User.objects.get_or_create(username=BENCH_USER)
        user.groups.set(user.groups.model.objects.filter(name=VIEWER))
        return User.objects.get(pk=user.pk)
