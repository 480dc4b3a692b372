"""The fault drill: crash real workers at every fault point, per downstream kind, and print the matrix."""
from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from durable.tools import drill
from durable.tools.drill_targets import SANDBOX
from durable.tools.faults import FAULT_POINTS
from durable.tools.processes import var_dir


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


class Command(BaseCommand):
    help = ("Run a workflow through real worker processes with each fault point armed in turn, for each of its "
            "side effects, approving what its runs ask for as the drill's own account; fail if any operation "
            "took effect twice, any run was lost, or a crash that nothing can settle ended anywhere but UNKNOWN.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs-per-cell", type=int, default=10)
        parser.add_argument("--waits", action="store_true",
                            help="drill the waits instead: events and child runs, at the waits' fault points "
                                 "(durable/tools/drill_waits.py; --points, --runs-per-cell, --workers, --timeout, "
                                 "--keep apply)")
        parser.add_argument("--points", type=_names, default=FAULT_POINTS,
                            help=f"comma-separated fault points (default: {','.join(FAULT_POINTS)})")
        parser.add_argument("--actions", type=_names, default=(),
                            help="comma-separated side-effect actions to crash in (default: every one the drilled "
                                 "version declares)")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--workflow", default="claims-agent")
        parser.add_argument("--workflow-version", type=int, default=None,
                            help="the workflow version to drill (default: the newest)")
        parser.add_argument("--target", default=SANDBOX,
                            help="dotted path of the drill target: the stand-ins of the workflow's downstreams and "
                                 "each run's input (default: the demo's sandbox, for claims-agent and support-agent)")
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds each cell's runs may take")
        parser.add_argument("--keep", action="store_true", help="keep the drill's runs even when the drill passes")

    def execute(self, *args: Any, **options: Any) -> str | None:
        if options.get("waits"):  # the waits' own drill handles the command
            from functools import partial

            from durable.tools import drill_waits

            self.handle = partial(drill_waits.handle, self)  # type: ignore[method-assign]
        return super().execute(*args, **options)

    def handle(self, *args: Any, runs_per_cell: int, points: tuple[str, ...], actions: tuple[str, ...],
               workers: int, workflow: str, workflow_version: int | None, target: str, timeout: float, keep: bool,
               **_: Any) -> None:
        logs = var_dir() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        config = drill.DrillConfig(runs_per_cell=runs_per_cell, points=points, actions=actions, workers=workers,
                                   workflow=workflow, version=workflow_version, target=target, timeout=timeout,
                                   log_dir=logs)
        try:
            drill.validate(config)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        _refuse_unmigrated()
        self.stdout.write(drill.banner(config))
        result = drill.run_drill(config, on_cell=self._progress(len(config.cells())))
        self.stdout.write("")
        self.stdout.write(drill.format_matrix(result))
        if not result.ok:
            # The runs stay: their statuses, journals and ledger rows are the evidence.
            raise CommandError(f"the drill found violations; its runs are kept for inspection, worker logs in {logs}")
        if not keep:
            kept = drill.forget(result)
            if kept:
                self.stdout.write(f"{kept} run(s) kept: the audit trail, append-only, records the approvals the "
                                  "drill's account decided on them")

    def _progress(self, cells: int) -> Callable[[drill.CellResult], None]:
        numbers = count(1)

        def report(cell: drill.CellResult) -> None:  # a long drill shows it is alive, cell by cell
            restarts = f", {cell.worker_restarts} worker restart(s)" if cell.worker_restarts else ""
            self.stdout.write(f"  cell {next(numbers)}/{cells} {cell.cell.point} x {cell.cell.action}: "
                              f"{cell.verdict} ({cell.seconds:.1f} s{restarts})")

        return report


def _refuse_unmigrated() -> None:
    """The drill runs against the database as it is: migrating it is a deploy's business, not a drill's."""
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        raise CommandError("the database has migrations not applied yet: run `python manage.py migrate` first")
