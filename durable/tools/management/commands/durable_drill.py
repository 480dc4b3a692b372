"""The fault drill: crash real workers at every fault point, per downstream kind, and print the matrix."""
from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from durable.tools import drill
from durable.tools.faults import FAULT_POINTS


def _names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


class Command(BaseCommand):
    help = ("Run a workflow through real worker processes with each fault point armed in turn, for each "
            "downstream kind; fail if any operation took effect twice, any run was lost, or a crash that "
            "nothing can settle ended anywhere but UNKNOWN.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs-per-cell", type=int, default=10)
        parser.add_argument("--waits", action="store_true",
                            help="drill the waits instead: events and child runs, at the waits' fault points "
                                 "(durable/tools/drill_waits.py; --points, --runs-per-cell, --workers, --timeout, "
                                 "--keep apply)")
        parser.add_argument("--points", type=_names, default=FAULT_POINTS,
                            help=f"comma-separated fault points (default: {','.join(FAULT_POINTS)})")
        parser.add_argument("--actions", type=_names, default=drill.DEFAULT_ACTIONS,
                            help="comma-separated side-effect actions to crash in (default: refund,ticket,notify)")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--workflow", default="claims-agent",
                            help='a workflow whose input is {"order_id": "ORD-<n>", "customer_message": "..."}')
        parser.add_argument("--workflow-version", type=int, default=1,
                            help="the workflow version to drill (default 1: claims-agent v2 waits for a human)")
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds each cell's runs may take")
        parser.add_argument("--keep", action="store_true", help="keep the drill's runs even when the drill passes")

    def execute(self, *args: Any, **options: Any) -> str | None:
        if options.get("waits"):  # the waits' own drill handles the command
            from functools import partial

            from durable.tools import drill_waits

            self.handle = partial(drill_waits.handle, self)  # type: ignore[method-assign]
        return super().execute(*args, **options)

    def handle(self, *args: Any, runs_per_cell: int, points: tuple[str, ...], actions: tuple[str, ...],
               workers: int, workflow: str, workflow_version: int, timeout: float, keep: bool, **_: Any) -> None:
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        config = drill.DrillConfig(runs_per_cell=runs_per_cell, points=points, actions=actions, workers=workers,
                                   workflow=workflow, version=workflow_version, timeout=timeout, log_dir=logs)
        try:
            drill.validate(config)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        call_command("migrate", verbosity=0, interactive=False)
        self.stdout.write(drill.banner(config))
        result = drill.run_drill(config, on_cell=self._progress(len(config.cells())))
        self.stdout.write("")
        self.stdout.write(drill.format_matrix(result))
        if not result.ok:
            # The runs stay: their statuses, journals and ledger rows are the evidence.
            raise CommandError(f"the drill found violations; its runs are kept for inspection, worker logs in {logs}")
        if not keep:
            drill.forget(result)

    def _progress(self, cells: int) -> Callable[[drill.CellResult], None]:
        numbers = count(1)

        def report(cell: drill.CellResult) -> None:  # a long drill shows it is alive, cell by cell
            restarts = f", {cell.worker_restarts} worker restart(s)" if cell.worker_restarts else ""
            self.stdout.write(f"  cell {next(numbers)}/{cells} {cell.cell.point} x {cell.cell.action}: "
                              f"{cell.verdict} ({cell.seconds:.1f} s{restarts})")

        return report
