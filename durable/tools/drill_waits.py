"""The fault drill's waits (`durable_drill --waits`): crash real workers at the waits' fault points while events
arrive early, twice with one Idempotency-Key or in a burst, and while parents delegate to child runs; count events
consumed twice or lost, children started twice or not at all, runs lost (invariants 18 and 19).

Each cell arms one fault point (durable.runtime.fault_points.WAIT_FAULT_POINTS) in fresh workers that sweep only
the drill's runs, on a queue of their own, as the side-effect drill's cells do (durable/tools/drill.py).
"""
from __future__ import annotations

import itertools
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.test import override_settings

from durable import services
from durable.conf import durable_settings
from durable.engine.states import RunStatus
from durable.events import send_event
from durable.models import JournalEntry, OperatorAction, Run, RunEvent
from durable.runtime.dispatch import drop_queue
from durable.runtime.fault_points import (
    AFTER_CHILD_FINISHED,
    AFTER_CHILD_STARTED,
    AFTER_CHILDREN_ENDED,
    AFTER_EVENT_CONSUMED,
    FAULT_POINTS,
    WAIT_FAULT_POINTS,
)
from durable.tools.drill import (
    DRILL_ENV,
    SETTLED,
    DrillWorkers,
    Judged,
    cancel_unsettled,
    refuse_sizes_and_points,
    table,
)
from durable.tools.drill_waits_workload import EVENT, LISTENER, PARENT
from durable.tools.workload import delete_runs, retire, scope_env, tool_account, wait_for_runs

WORKLOAD = "durable.tools.drill_waits_workload"
SENDER = "durable_drill"


@dataclass(frozen=True)
class Scenario:
    """How the drill feeds a cell's runs: the events it sends each run (and when), or a parent with a child."""

    name: str
    title: str
    events: int = 0  # distinct events each run waits for (0: a parent that delegates to a child run)
    copies: int = 1  # how often each event is sent, with one Idempotency-Key
    early: bool = False  # sent in the start's transaction: in the mailbox before the run can wait


SCENARIOS = {scenario.name: scenario for scenario in (
    Scenario("early", "2 events sent before the wait", events=2, early=True),
    Scenario("retried", "2 events, each sent 5x with one key", events=2, copies=5),
    Scenario("burst", "5 events sent at once", events=5),
    Scenario("child", "a parent waiting for its child"),
)}
CELLS = ((AFTER_EVENT_CONSUMED, "early"), (AFTER_EVENT_CONSUMED, "retried"), (AFTER_EVENT_CONSUMED, "burst"),
         (AFTER_CHILD_STARTED, "child"), (AFTER_CHILD_FINISHED, "child"), (AFTER_CHILDREN_ENDED, "child"))


@dataclass(frozen=True)
class WaitsCell:
    point: str
    scenario: Scenario

    @property
    def label(self) -> str:
        return f"{self.point}-{self.scenario.name}"


@dataclass(frozen=True)
class WaitsConfig:
    runs_per_cell: int = 10
    points: tuple[str, ...] = WAIT_FAULT_POINTS
    workers: int = 2
    timeout: float = 300.0  # per cell, from the moment its runs are started
    log_dir: Path | None = None

    def cells(self) -> list[WaitsCell]:
        return [WaitsCell(point, SCENARIOS[name]) for point, name in CELLS if point in self.points]


def validate(config: WaitsConfig) -> None:
    """Refuse a drill that cannot mean anything, saying which option to fix."""
    refuse_sizes_and_points(config.runs_per_cell, config.workers, config.points, WAIT_FAULT_POINTS,
                            "the waits' fault points")


# -- what a cell must show -------------------------------------------------


@dataclass(frozen=True)
class WaitsCounts:
    """What one cell's runs did, from the database: runs, mailboxes, the timeline's consumptions, child runs."""

    runs: int
    crashes: int  # fault points that fired: one marker file each
    completed: int
    lost_runs: int  # runs (a parent's child included) that did not succeed
    events_sent: int  # distinct events the drill sent (an event sent five times with one key is one)
    consumed: int  # consumptions the timeline records
    duplicates: int  # events kept twice, or consumed twice
    lost_events: int  # events sent and never consumed by a run that succeeded, or not kept at all
    out_of_order: int  # runs whose events were not consumed in arrival order
    children: int  # child runs started
    extra_children: int  # child runs beyond one per parent visit
    missing_children: int  # parent visits without a child run


def judge(counts: WaitsCounts) -> list[str]:
    """The cell's violations; an empty list means no event and no child went missing or came twice."""
    c, reasons = counts, []
    for name, text in (("duplicates", "event(s) kept or consumed twice"), ("lost_events", "event(s) lost"),
                       ("out_of_order", "run(s) consumed events out of arrival order"),
                       ("extra_children", "child run(s) started twice"),
                       ("missing_children", "parent visit(s) without their child run"), ("lost_runs", "run(s) lost")):
        if getattr(c, name):
            reasons.append(f"{getattr(c, name)} {text}")
    if c.crashes < c.runs:  # a run the fault missed proves nothing about recovery
        reasons.append(f"the fault fired in only {c.crashes} of {c.runs} run(s)")
    return reasons


@dataclass(frozen=True)
class WaitsCellResult(Judged):
    cell: WaitsCell
    counts: WaitsCounts
    violations: tuple[str, ...]
    run_ids: tuple[UUID, ...]  # the runs the drill started and their children
    seconds: float
    worker_restarts: int = 0


@dataclass(frozen=True)
class WaitsResult:
    config: WaitsConfig
    cells: tuple[WaitsCellResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(cell.ok for cell in self.cells)

    def total(self, name: str) -> int:
        return sum(getattr(cell.counts, name) for cell in self.cells)


# -- running it ------------------------------------------------------------


def run_waits_drill(config: WaitsConfig, *,
                    on_cell: Callable[[WaitsCellResult], None] | None = None) -> WaitsResult:
    """Every cell in turn, each with fresh workers, queue and fault markers, as an account of the drill's own."""
    validate(config)
    started, results = time.monotonic(), []
    account = tool_account("drill")
    try:
        for cell in config.cells():
            results.append(run_cell(config, cell, account))
            if on_cell is not None:
                on_cell(results[-1])
    finally:
        retire(account)
    return WaitsResult(config, tuple(results), time.monotonic() - started)


def run_cell(config: WaitsConfig, cell: WaitsCell, account: User) -> WaitsCellResult:
    started = time.monotonic()
    fault_dir = Path(tempfile.mkdtemp(prefix="durable-drill-faults-"))
    queue = f"durable-drill-{uuid.uuid4().hex[:8]}"
    modules = ",".join(dict.fromkeys([*durable_settings.DURABLE_WORKFLOW_MODULES, WORKLOAD]))
    env = {**DRILL_ENV, **scope_env(account), "DURABLE_FAULT_POINTS": cell.point, "DURABLE_FAULT_DIR": str(fault_dir),
           "DURABLE_WORKFLOW_MODULES": modules}
    try:
        with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
            with DrillWorkers(env, config.workers, config.log_dir, cell.label) as workers:
                run_ids = start_runs(cell.scenario, config.runs_per_cell, account)
                wait_for_runs(run_ids, until=SETTLED, timeout=config.timeout, tick=workers.supervise)
            # Counted only once the workers are gone: nothing can consume or start anything after this.
            counts = measure(cell.scenario, run_ids, crashes=len(list(fault_dir.iterdir())))
            drop_queue(queue)
    finally:
        shutil.rmtree(fault_dir, ignore_errors=True)
    everything = [*run_ids, *Run.objects.filter(parent_run_id__in=run_ids).values_list("id", flat=True)]
    cancel_unsettled(everything)
    return WaitsCellResult(cell, counts, tuple(judge(counts)), tuple(everything), time.monotonic() - started,
                           workers.restarts)


def start_runs(scenario: Scenario, runs: int, account: User) -> list[UUID]:
    """Start the cell's runs and send their events as the scenario says: with the start, or all at once after."""
    batch = uuid.uuid4().hex[:8]
    if not scenario.events:
        return [_start(PARENT, f"drill-{batch}-{n}", {"value": n}, account) for n in range(runs)]
    run_ids = []
    for n in range(runs):
        with transaction.atomic():  # an early event is in the mailbox before the run's message leaves
            run_id = _start(LISTENER, f"drill-{batch}-{n}", {"expect": scenario.events}, account)
            if scenario.early:
                for send in _sends(scenario, run_id):
                    send()
        run_ids.append(run_id)
    if not scenario.early:
        with ThreadPoolExecutor(max_workers=8) as pool:  # as webhooks arrive: concurrently, retried at once
            for future in [pool.submit(_closing, send) for run_id in run_ids for send in _sends(scenario, run_id)]:
                future.result()
    return run_ids


def _start(workflow: str, key: str, given: dict[str, Any], account: User) -> UUID:
    run, _ = services.start_run(workflow=workflow, input=given, business_key=key, user=account)
    return run.id


def _sends(scenario: Scenario, run_id: UUID) -> list[Callable[[], Any]]:
    """Each send of each event to the run: event n carries seq n, and its copies one Idempotency-Key."""
    def send(seq: int) -> Callable[[], Any]:
        key = f"drill-{run_id}-{seq}" if scenario.copies > 1 else None
        return partial(send_event, run_id=run_id, name=EVENT, payload={"seq": seq}, idempotency_key=key,
                       sender=SENDER)
    return [send(seq) for seq in range(scenario.events) for _ in range(scenario.copies)]


def _closing(send: Callable[[], Any]) -> Any:
    try:
        return send()
    finally:
        connection.close()  # the pool's thread's own connection


# -- counting --------------------------------------------------------------


def measure(scenario: Scenario, run_ids: list[UUID], *, crashes: int) -> WaitsCounts:
    runs = dict(Run.objects.filter(id__in=run_ids).values_list("id", "status"))
    outputs = dict(Run.objects.filter(id__in=run_ids).values_list("id", "output"))
    children = list(Run.objects.filter(parent_run_id__in=run_ids).values_list("parent_run_id", "status"))
    per_parent = Counter(parent for parent, _ in children)
    events = _event_counts(scenario, run_ids, runs, outputs) if scenario.events else {}
    return WaitsCounts(
        runs=len(runs), crashes=crashes, completed=sum(status == RunStatus.SUCCEEDED for status in runs.values()),
        lost_runs=sum(status != RunStatus.SUCCEEDED for status in [*runs.values(), *(s for _, s in children)]),
        events_sent=len(run_ids) * scenario.events, consumed=events.get("consumed", 0),
        duplicates=events.get("duplicates", 0), lost_events=events.get("lost_events", 0),
        out_of_order=events.get("out_of_order", 0), children=len(children),
        extra_children=sum(max(0, count - 1) for count in per_parent.values()),
        missing_children=0 if scenario.events else sum(per_parent[run_id] == 0 for run_id in runs),
    )


def _event_counts(scenario: Scenario, run_ids: list[UUID], runs: dict[UUID, str],
                  outputs: dict[UUID, Any]) -> dict[str, int]:
    """Per run: the mailbox (one row per distinct event), the timeline's consumptions, the output's events."""
    kept: dict[UUID, list[int]] = {run_id: [] for run_id in run_ids}
    for run_id, event_id in RunEvent.objects.filter(run_id__in=run_ids).order_by("id").values_list("run_id", "id"):
        kept[run_id].append(event_id)
    taken: dict[UUID, list[int]] = {run_id: [] for run_id in run_ids}
    for run_id, detail in (JournalEntry.objects.filter(run_id__in=run_ids, kind=JournalEntry.Kind.WAIT_ENDED)
                           .order_by("id").values_list("run_id", "detail")):
        if isinstance(detail, dict) and "consumed" in detail:
            taken[run_id].append(detail["consumed"])
    counts = Counter[str]()
    for run_id in run_ids:
        heard = [event["id"] for event in (outputs.get(run_id) or {}).get("received", [])]
        counts["consumed"] += len(taken[run_id])
        counts["duplicates"] += (max(0, len(kept[run_id]) - scenario.events) + len(taken[run_id])
                                 - len(set(taken[run_id])) + len(heard) - len(set(heard)))
        missing = scenario.events - len(set(kept[run_id]))  # sent, never kept
        if runs[run_id] == RunStatus.SUCCEEDED:
            missing += len(set(kept[run_id]) - set(heard))  # kept, never handed to the run
        counts["lost_events"] += max(0, missing)
        counts["out_of_order"] += heard != sorted(heard) or heard != taken[run_id][:len(heard)]
    return dict(counts)


def forget(result: WaitsResult) -> int:
    """Delete the drill's runs (their children included), mailboxes, checkpoints and journals, but for the runs
    the audit trail names (each event sent is audited, and the trail is append-only). Returns how many stayed."""
    run_ids = [run_id for cell in result.cells for run_id in cell.run_ids]
    audited = set(OperatorAction.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True))
    delete_runs([run_id for run_id in run_ids if run_id not in audited])
    return len(audited)


# -- the matrix ------------------------------------------------------------

COLUMNS = (
    ("fault point", 20, "<"), ("scenario", 36, "<"), ("runs", 4, ">"), ("crashes", 7, ">"), ("completed", 9, ">"),
    ("events", 6, ">"), ("consumed", 8, ">"), ("duplicates", 10, ">"), ("lost events", 11, ">"),
    ("children", 8, ">"), ("extra children", 14, ">"), ("lost runs", 9, ">"), ("verdict", 0, "<"),
)


def banner(config: WaitsConfig) -> str:
    broker = settings.CELERY_BROKER_URL.split("://")[0]
    return (f"durable_drill --waits: events and child runs, {config.runs_per_cell} run(s) per cell, "
            f"{len(config.cells())} cell(s), {config.workers} worker(s), database {connection.vendor}, "
            f"broker {broker}")


def _row(cell: WaitsCellResult) -> list[object]:
    c = cell.counts
    return [cell.cell.point, cell.cell.scenario.title, c.runs, c.crashes, c.completed, c.events_sent, c.consumed,
            c.duplicates, c.lost_events, c.children, c.extra_children, c.lost_runs, cell.verdict]


def format_matrix(result: WaitsResult) -> str:
    """A fixed-width table, one row per cell, then the totals: pasteable into docs/fault-drill.md."""
    lines = table(COLUMNS, (_row(cell) for cell in result.cells))
    totals = {field.name: result.total(field.name) for field in fields(WaitsCounts)}
    lines += [
        "",
        f"totals: {totals['runs']} runs, {totals['crashes']} crash-injected, {totals['events_sent']} events sent, "
        f"{totals['consumed']} consumed, {totals['duplicates']} duplicate(s), {totals['lost_events']} lost "
        f"event(s), {totals['children']} child runs ({totals['extra_children']} extra, "
        f"{totals['missing_children']} missing), {totals['lost_runs']} lost run(s), "
        f"{sum(not cell.ok for cell in result.cells)} cell(s) in violation",
        f"elapsed: {result.seconds:.1f} s",
    ]
    return "\n".join(lines)


# -- the command -----------------------------------------------------------


def handle(command: BaseCommand, *args: Any, runs_per_cell: int, points: tuple[str, ...], workers: int,
           timeout: float, keep: bool, **_: Any) -> None:
    """`durable_drill --waits`: the options it shares with the side-effect drill; --points names waits' points."""
    logs = Path(getattr(settings, "VAR_DIR", None) or tempfile.gettempdir()) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    config = WaitsConfig(runs_per_cell=runs_per_cell, workers=workers, timeout=timeout, log_dir=logs,
                         points=WAIT_FAULT_POINTS if tuple(points) == FAULT_POINTS else tuple(points))
    try:
        validate(config)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(banner(config))
    cells, numbers = len(config.cells()), itertools.count(1)

    def progress(cell: WaitsCellResult) -> None:  # a long drill shows it is alive, cell by cell
        restarts = f", {cell.worker_restarts} worker restart(s)" if cell.worker_restarts else ""
        command.stdout.write(f"  cell {next(numbers)}/{cells} {cell.cell.point} x {cell.cell.scenario.name}: "
                             f"{cell.verdict} ({cell.seconds:.1f} s{restarts})")

    result = run_waits_drill(config, on_cell=progress)
    command.stdout.write("")
    command.stdout.write(format_matrix(result))
    if not result.ok:  # the runs stay: their statuses, mailboxes and journals are the evidence
        raise CommandError(f"the drill found violations; its runs are kept for inspection, worker logs in {logs}")
    if not keep and (kept := forget(result)):
        command.stdout.write(f"{kept} run(s) kept: the audit trail, append-only, records the events sent to them")
