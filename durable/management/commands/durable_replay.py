"""Re-execute recorded runs against the workflow code installed here, answering every call from the record.

Nothing is called and nothing is written. Each run whose code now asks for something else than it recorded (another
call, a side effect with another request, another approval, another route) is reported: run, visit, call, the
recorded and the new; the command then exits 1. Runs come from this database, or from an export
(`durable_export`) with --from, so a host can replay production's runs in CI before a deploy.
"""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.management.commands.durable_export import selected_runs
from durable.replay_records import RecordedRun, from_database, read_export
from durable.replayer import replay_runs


class Command(BaseCommand):
    help = ("Replay recorded runs on the code installed here, every call answered from the record; "
            "exit 1 listing each run whose code would now ask for something else.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="source", help="an export written by durable_export (default: this database)")
        parser.add_argument("--workflow", help="only runs of this workflow")
        parser.add_argument("--run", action="append", default=[], help="only this run (repeatable)")
        parser.add_argument("--unfinished", action="store_true",
                            help="only runs that have not ended, and only the visit a worker would run again")
        parser.add_argument("--limit", type=int, default=0, help="at most this many runs (from the database)")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = self._runs(options)
        replayed = differ = unreadable = visits = 0
        for report in replay_runs(runs, current_visit_only=options["unfinished"]):
            replayed += 1
            visits += report.visits
            if report.problem:
                unreadable += 1
                self.stdout.write(self.style.WARNING(f"run {report.run_id} ({report.workflow} v{report.version}) "
                                                     f"not replayed: {report.problem}"))
            for mismatch in report.mismatches:
                self.stdout.write(self.style.ERROR(
                    f"run {report.run_id} ({report.workflow} v{report.version}) visit {mismatch.visit} "
                    f"step {mismatch.step!r} {mismatch.call}: recorded {mismatch.recorded!r}, new {mismatch.new!r}"))
            differ += bool(report.mismatches)
        summary = (f"replayed {replayed} run(s), {visits} visit(s): {differ} would now ask for something else, "
                   f"{unreadable} not replayed")
        if differ:
            raise CommandError(summary, returncode=1)
        self.stdout.write(self.style.SUCCESS(summary))

    @staticmethod
    def _runs(options: dict[str, Any]) -> Any:
        if not options["source"]:
            return from_database(selected_runs(options))
        try:
            with open(options["source"], encoding="utf-8") as export:
                runs: list[RecordedRun] = list(read_export(export))
        except (OSError, ValueError) as exc:
            raise CommandError(f"--from {options['source']}: {exc}") from None
        wanted = set(options["run"])
        return [run for run in runs
                if (not options["workflow"] or run.workflow == options["workflow"])
                and (not wanted or run.run_id in wanted)
                and (not options["unfinished"] or run.unfinished)]
