"""Benchmark the console's busiest pages on a big database (Postgres)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse
from django.utils import timezone

from durable.roles import VIEWER, ensure_roles
from durable.tools.bench import console, parked

BUDGET_MS = 100.0
BENCH_USER = "bench-console-viewer"


@dataclass(frozen=True)
class Page:
    name: str
    url: str
    marker: str = ""  # appears once per listed row
    status: int = 200  # 302: a search that opens the one thing it found
    htmx: bool = False  # asked as htmx polls it: the fragment
    unchanged: bool = False  # a poll carrying the version it shows (If-None-Match): answered 304


def polls(screens: list[Page]) -> list[Page]:
    """Each live screen's poll twice: answered with its fragment (something changed) and with 304 (nothing did)."""
    return [poll for page in screens for poll in (
        Page(f"{page.name}, poll", page.url, page.marker, htmx=True),
        Page(f"{page.name}, poll unchanged", page.url, status=304, htmx=True, unchanged=True))]


def pages(sample: dict[str, str]) -> list[Page]:
    wf, with_approvals = f"{console.PREFIX}2", f"{console.PREFIX}0"  # seed() asks approvals of every 100th run
    day = (timezone.now() - timedelta(days=2)).date()
    runs, search = reverse("durable:runs"), reverse("durable:search")
    inbox, queue = reverse("approvals:inbox"), reverse("reconciliation:operations")
    row, request_row, hit = 'class="run-row"', 'class="approval-row"', 'class="search-hit"'
    live = [Page("runs, first page", runs, row), Page("run page", reverse("durable:run-detail", args=[sample["run"]])),
            Page("approvals inbox", inbox, request_row),
            Page("approval page", reverse("approvals:detail", args=[sample["approval"]])),
            Page("reconciliation queue", queue, 'class="operation-row"'),
            Page("operation page", reverse("reconciliation:operation", args=[sample["operation"]])),
            Page("overview", reverse("durable:overview"), "<td")]
    return [
        Page("runs, first page", runs, row),
        Page("runs, status=FAILED", f"{runs}?status=FAILED", row),
        Page("runs, workflow+version+status", f"{runs}?workflow={wf}&version=3&status=FAILED", row),
        Page("runs, business key", f"{runs}?business_key=ORD-123457", row),
        Page("runs, created in one day", f"{runs}?created_after={day}&created_before={day + timedelta(days=1)}", row),
        Page("run page", reverse("durable:run-detail", args=[sample["run"]])),
        Page("approvals inbox", inbox, request_row),
        Page("approvals inbox, workflow+kind", f"{inbox}?workflow={with_approvals}&kind=refund", request_row),
        Page("approval page", reverse("approvals:detail", args=[sample["approval"]])),
        Page("reconciliation queue", queue, 'class="operation-row"'),
        Page("operation page", reverse("reconciliation:operation", args=[sample["operation"]])),
        Page("overview", reverse("durable:overview"), "<td"),
        *polls(live),
        Page("search, run id", f"{search}?q={sample['run']}", status=302),
        Page("search, approval id", f"{search}?q={sample['approval']}", status=302),
        Page("search, operation id", f"{search}?q={sample['operation']}", status=302),
        Page("search, business key part", f"{search}?q=ord-{sample['eleven']}", hit),
        Page("search, common part", f"{search}?q=ord-99", hit),
        Page("search, customer email", f"{search}?q={sample['customer']}", status=302),
        Page("search, customer part", f"{search}?q=customer-{sample['eleven']}", hit),
        Page("search, nothing found", f"{search}?q=no-such-order", hit),
        *parked_pages(runs, row),
    ]


def parked_pages(runs: str, row: str) -> list[Page]:
    """With runs parked by `durable_bench --parked N --keep`: the runs list filtered on them, and one's page."""
    parked_run = parked.sample_run()
    if parked_run is None:
        return []
    return [Page("runs, status=WAITING (parked)", f"{runs}?status=WAITING", row),
            Page("run page, a parked run", reverse("durable:run-detail", args=[parked_run]))]


class Command(BaseCommand):
    help = ("Seed N runs, M pending approvals and operations (Postgres), then time the console's pages, the "
            "ones it polls and its search in-process, as a browser on a production install asks them: "
            "p50/p95/max server time per page.")

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
        # As a browser reaches a production install: a host ALLOWED_HOSTS accepts, over HTTPS.
        host = console.allowed_host()
        client = Client(HTTP_HOST=host)
        client.force_login(self._viewer())
        self.stdout.write(f"\nas {BENCH_USER} at https://{host}/, {repeat} requests a page after one warm-up")
        self.stdout.write(f"{'page':38} {'rows':>5} {'answer':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  budget")
        with override_settings(DEBUG=False):
            for page in pages(console.samples()):
                headers = {"HTTP_HX_REQUEST": "true"} if page.htmx else {}
                t = console.time_page(client, page.name, page.url, repeat, page.marker, status=page.status,
                                      revalidate=page.unchanged, **headers)
                verdict = "ok" if t.p95_ms < BUDGET_MS else f"OVER {BUDGET_MS:.0f} ms"
                if t.changed:
                    verdict += f" ({t.changed} of {repeat} answered 200: the state changed between two polls)"
                self.stdout.write(f"{t.name:38} {t.rows:>5} {t.status:>6} {t.p50_ms:>8.1f} {t.p95_ms:>8.1f} "
                                  f"{t.max_ms:>8.1f}  {verdict}")

    def _viewer(self) -> User:
        ensure_roles()
        user, _ = User.objects.get_or_create(username=BENCH_USER)
        user.groups.set(user.groups.model.objects.filter(name=VIEWER))
        return User.objects.get(pk=user.pk)
