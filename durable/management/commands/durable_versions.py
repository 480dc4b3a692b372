"""In-flight runs per workflow version, what can be retired, and what is blocked and why.

With --check it is the deploy gate: run with the new code before its workers start, it exits 1
listing the unfinished runs that code would block (durable.deploy_gate), or hold on a replay
mismatch (their current visit replayed on it: durable.replayer), and 0 when every one of them can resume.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.deploy_gate import BlockedRun, blocked_runs, held_runs, patch_uses, stranded_schedules
from durable.versions import version_reports

SHOWN_PER_GROUP = 20


class Command(BaseCommand):
    help = ("Show in-flight runs per workflow version, which versions can be retired, and blocked runs. "
            "--check: exit 1 if the workflow code installed here would block any unfinished run.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true",
                            help="deploy gate: list the unfinished runs this code would block; exit 1 if any")
        parser.add_argument("--allow-migratable", action="store_true",
                            help="with --check: pass when every blocked run has a registered migration that "
                                 "covers it (an operator then migrates them, audited)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            self._gate(allow_migratable=options["allow_migratable"])
        else:
            self._report()

    def _gate(self, *, allow_migratable: bool) -> None:
        groups: dict[tuple[str, int], list[BlockedRun]] = defaultdict(list)
        for blocked in blocked_runs():
            groups[(blocked.workflow, blocked.version)].append(blocked)
        self._schedules_gate()
        held = self._held()
        if not groups and held:
            raise CommandError(f"deploy gate: {held} unfinished run(s) would be held on a replay mismatch by this code; "
                               "restore what they recorded or guard the change with ctx.patched(...)", returncode=1)
        if not groups:
            self.stdout.write(self.style.SUCCESS("deploy gate: every unfinished run can resume on this code"))
            return
        uncovered = 0
        for (workflow, version), runs in sorted(groups.items()):
            self.stdout.write(self.style.ERROR(f"{workflow} v{version}: {len(runs)} unfinished run(s) would be blocked"))
            for blocked in runs[:SHOWN_PER_GROUP]:
                cover = blocked.migration or "no registered migration covers it"
                self.stdout.write(f"  {blocked.run_id} {blocked.status} at {blocked.step!r}: "
                                  f"{blocked.refusal.kind}: {blocked.refusal.message}; {cover}")
            if len(runs) > SHOWN_PER_GROUP:
                self.stdout.write(f"  ... and {len(runs) - SHOWN_PER_GROUP} more")
            uncovered += sum(1 for blocked in runs if blocked.migration is None)
        total = sum(len(runs) for runs in groups.values())
        if allow_migratable and not uncovered and not held:
            self.stdout.write(self.style.WARNING(
                f"deploy gate: {total} run(s) would be blocked, each covered by a registered migration; "
                "migrate them after the deploy (console or POST /api/runs/migrate-blocked/)"))
            return
        also_held = f", and {held} would be held on a replay mismatch" if held else ""
        raise CommandError(f"deploy gate: {total} unfinished run(s) would be blocked by this code "
                           f"({uncovered} with no registered migration){also_held}. Keep the versions they are pinned to "
                           "registered, or register a migration, before deploying.", returncode=1)

    def _held(self) -> int:
        """The unfinished runs whose current visit this code would hold on a replay mismatch, listed; how many."""
        held = 0
        for report in held_runs():
            held += 1
            if held <= SHOWN_PER_GROUP:
                for mismatch in report.mismatches:
                    self.stdout.write(self.style.ERROR(
                        f"{report.workflow} v{report.version}: run {report.run_id} would be held: {mismatch.message}"))
        if held > SHOWN_PER_GROUP:
            self.stdout.write(f"  ... and {held - SHOWN_PER_GROUP} more held")
        return held

    def _schedules_gate(self) -> None:
        """Schedules of workflows (or input models) this code takes away would start no run: the gate fails first."""
        stranded = list(stranded_schedules())
        for schedule in stranded:
            self.stdout.write(self.style.ERROR(f"schedule {schedule.name} ({schedule.workflow}): {schedule.problem}"))
        if stranded:
            raise CommandError(f"deploy gate: {len(stranded)} active schedule(s) would start no run on this code. "
                               "Keep their workflow registered, edit their input, or pause them, before deploying.",
                               returncode=1)

    def _report(self) -> None:
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
        self._patches()

    def _patches(self) -> None:
        """The patches unfinished runs still depend on (ctx.patched), and which old branches can go."""
        uses = patch_uses()
        if not uses:
            return
        self.stdout.write("patches asked by unfinished runs' current visits:")
        for use in uses:
            verdict = ("its old branch can be deleted" if not use.old_branch
                       else f"keep its old branch: {use.old_branch} run(s) take it")
            self.stdout.write(f"  {use.workflow} v{use.version} patch {use.patch!r}: {use.old_branch} run(s) on the "
                              f"old branch, {use.new_branch} on the new; {verdict}")
