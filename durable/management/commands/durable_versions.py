"""In-flight runs per workflow version, what can be retired, and what is blocked and why."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from durable.versions import version_reports


class Command(BaseCommand):
    help = "Show in-flight runs per workflow version, which versions can be retired, and blocked runs."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"{'workflow':<24} {'version':>7} {'registered':<10} {'in flight':>9}  retire?  by status")
        for r in version_reports():
            verdict = "yes" if r.retirable else ("LATEST" if r.latest else "no")
            statuses = ", ".join(f"{s} {n}" for s, n in sorted(r.in_flight.items())) or "-"
            self.stdout.write(f"{r.workflow:<24} {r.version:>7} {'yes' if r.registered else 'NO':<10} "
                              f"{r.in_flight_total:>9}  {verdict:<7}  {statuses}")
            if not r.registered and r.in_flight_total:
                self.stdout.write(self.style.WARNING(
                    f"  ! {r.in_flight_total} run(s) of {r.workflow} v{r.version} are in flight but no worker "
                    "has this version: deploy it again or migrate them"))
            for run_id, reason in r.blocked:
                self.stdout.write(f"  blocked {run_id}: {reason}")
