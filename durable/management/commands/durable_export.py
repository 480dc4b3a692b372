"""Write what runs recorded as JSON lines, for `durable_replay --from` (in CI, without the production database).

An export holds what the runs recorded: their states, the payloads of their side effects, model answers and
approval snapshots. Treat it as production data.
"""
from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from durable.engine.states import TERMINAL
from durable.models import Run
from durable.replay_records import from_database, write_export


class Command(BaseCommand):
    help = "Export recorded runs (checkpoints, recorded calls, ledger rows, approvals, patches) as JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", "-o", default="-", help="file to write (default: standard output)")
        parser.add_argument("--workflow", help="only runs of this workflow")
        parser.add_argument("--run", action="append", default=[], help="only this run (repeatable)")
        parser.add_argument("--unfinished", action="store_true", help="only runs that have not ended")
        parser.add_argument("--limit", type=int, default=0, help="at most this many runs, newest first")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = selected_runs(options)
        if options["output"] == "-":
            written = write_export(from_database(runs), sys.stdout)
        else:
            with open(options["output"], "w", encoding="utf-8") as out:
                written = write_export(from_database(runs), out)
        self.stderr.write(f"exported {written} run(s)")


def selected_runs(options: dict[str, Any]) -> Any:
    """The runs the options name, newest first (durable_replay selects the same way)."""
    runs = Run.objects.all()
    if options.get("workflow"):
        runs = runs.filter(workflow_name=options["workflow"])
    if options.get("run"):
        runs = runs.filter(id__in=options["run"])
    if options.get("unfinished"):
        runs = runs.exclude(status__in=[s.value for s in TERMINAL])
    runs = runs.order_by("-created_at", "-id")
    return runs[: options["limit"]] if options.get("limit") else runs
