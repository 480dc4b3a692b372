"""The fault drill: crash real workers at each fault point, per side effect, and count what happened twice.

It drills any registered workflow against a target (durable/tools/drill_targets.py: stand-ins for its
downstreams that count effects, and each run's input), and decides the approvals its runs ask for as an
account of its own (durable/tools/drill_approvals.py). Its workers run under durable.tools.drill_settings.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from durable import forks, services
from durable.engine.states import RunStatus
from durable.errors import Conflict
from durable.fleet import pool_size
from durable.models import Checkpoint, DrillRecord, OperatorAction, Run
from durable.registry import UnknownWorkflow, registry
from durable.runtime.dispatch import drop_queue
from durable.tools.drill_approvals import DrillApprover
from durable.tools.drill_counts import (
    ENDED,
    CellCounts,
    capabilities_of,
    crashed_operations,
    expectation,
    judge,
    measure,
)
from durable.tools.drill_targets import SANDBOX, load_target
from durable.tools.faults import FAULT_POINTS
from durable.tools.processes import DRILL_SETTINGS, WorkerProcess, settings_module
from durable.tools.workload import delete_runs, retire, tool_account, wait_for_runs
from durable.workflow import Workflow

# What the drill's workers run with: a short lease, sweep and grace, so a crashed run is rescued within seconds
# instead of minutes; and a sweeper in every worker, whatever the project chose (durable.W016).
WORKER_SETTINGS: dict[str, Any] = {
    "DURABLE_LEASE_SECONDS": 2.0,
    "DURABLE_SWEEP_SECONDS": 1.0,
    "DURABLE_PENDING_GRACE_SECONDS": 2.0,
    "DURABLE_HTTP_TIMEOUT_SECONDS": 1.0,  # at most half the lease (durable.E014)
    "DURABLE_WORKER_SWEEPS": True,
}
# The same as environment variables, for a tool whose workers read them through the standalone project's settings.
DRILL_ENV = {name: str(value).lower() if isinstance(value, bool) else str(value)
             for name, value in WORKER_SETTINGS.items()}
# Where a cell stops waiting for a run. BLOCKED_VERSION too: nothing but an operator moves it on, and the verdict
# says the drill's workers lack the version, rather than the cell waiting out its timeout.
SETTLED = ENDED | {RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.BLOCKED_VERSION}


@dataclass(frozen=True)
class Cell:
    """One fault point armed for one side-effect action."""

    point: str
    action: str

    @property
    def label(self) -> str:
        return f"{self.point}-{self.action}"


@dataclass(frozen=True)
class DrillConfig:
    runs_per_cell: int = 10
    points: tuple[str, ...] = FAULT_POINTS
    actions: tuple[str, ...] = ()  # none named: every side effect the drilled version declares
    workers: int = 2
    workflow: str = "claims-agent"
    version: int | None = None  # None: the newest
    target: str = SANDBOX  # the stand-ins and the inputs (durable/tools/drill_targets.py)
    timeout: float = 300.0  # per cell, from the moment its runs are started
    log_dir: Path | None = None

    def cells(self) -> list[Cell]:
        return [Cell(point, action) for point in self.points for action in drilled_actions(self)]


def validate(config: DrillConfig) -> None:
    """Refuse a drill that cannot mean anything, saying which option to fix."""
    refuse_sizes_and_points(config.runs_per_cell, config.workers, config.points, FAULT_POINTS, "fault points")
    try:
        workflow = drilled_workflow(config)
    except UnknownWorkflow as exc:
        raise ValueError(f"--workflow: {exc}") from None
    declared = declared_actions(workflow)
    if not declared:
        raise ValueError(f"{workflow.name} v{workflow.version} declares no side effect: there is nothing a crash "
                         "could make happen twice, and nothing to drill")
    undeclared = sorted(set(config.actions) - set(declared))
    if undeclared:
        raise ValueError(f"--actions must be side effects {config.workflow} declares ({', '.join(declared)}); "
                         f"got {undeclared}")
    try:
        import_string(config.target)
    except ImportError as exc:
        raise ValueError(f"--target: {exc}") from None


def refuse_sizes_and_points(runs_per_cell: int, workers: int, points: tuple[str, ...], known: tuple[str, ...],
                            what: str) -> None:
    """The options every drill refuses alike: no run or worker, or no fault point it knows (`what` names them)."""
    if runs_per_cell < 1 or workers < 1:
        raise ValueError("--runs-per-cell and --workers must be at least 1")
    unknown = sorted(set(points) - set(known))
    if unknown or not points:
        raise ValueError(f"--points must name {what} among {', '.join(known)}; got {unknown}")


def drilled_workflow(config: DrillConfig) -> Workflow:
    """The version the drill starts its runs on: the one named, or the newest."""
    if config.version is None:
        return registry.latest(config.workflow)
    return registry.get(config.workflow, config.version)


def declared_actions(workflow: Workflow) -> list[str]:
    return sorted({action for step in workflow.steps for action in step.side_effects})


def drilled_actions(config: DrillConfig) -> tuple[str, ...]:
    """The actions named, or every side effect the drilled version declares."""
    return config.actions or tuple(declared_actions(drilled_workflow(config)))


class Judged:
    """A drilled cell's verdict from its violations (an empty tuple: it passed); the side effects' cells and
    the waits' (durable/tools/drill_waits.py) alike."""

    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else "VIOLATION: " + "; ".join(self.violations)


@dataclass(frozen=True)
class CellResult(Judged):
    cell: Cell
    downstream: str
    counts: CellCounts
    violations: tuple[str, ...]
    run_ids: tuple[UUID, ...]  # the runs the cell started
    seconds: float
    worker_restarts: int = 0
    fork_ids: tuple[UUID, ...] = ()  # a fork of each that completed (fork_completed)


@dataclass(frozen=True)
class DrillResult:
    config: DrillConfig
    cells: tuple[CellResult, ...]
    seconds: float
    approvals_decided: int = 0  # decisions the drill's approver account made

    @property
    def ok(self) -> bool:
        return all(cell.ok for cell in self.cells)

    def total(self, name: str) -> int:
        return sum(getattr(cell.counts, name) for cell in self.cells)


# -- running a drill -------------------------------------------------------


def run_drill(config: DrillConfig, *, on_cell: Callable[[CellResult], None] | None = None) -> DrillResult:
    """Every cell in turn, each with fresh workers, stand-ins, queue and fault markers.

    The drill starts its runs as an account of its own, approves what they ask for as another of its own, and
    its workers sweep only the first account's runs, on a queue of their own: pointed at a database other runs
    live in, it touches none of them (invariant 14)."""
    validate(config)
    started, started_at = time.monotonic(), timezone.now()
    results = []
    account = tool_account("drill")
    approver = DrillApprover(account)
    try:
        for number, cell in enumerate(config.cells(), start=1):
            results.append(run_cell(config, cell, number, account=account, approver=approver))
            if on_cell is not None:
                on_cell(results[-1])
    finally:
        retire(account)
        approver.retire()
    result = DrillResult(config, tuple(results), time.monotonic() - started, approver.decided)
    record(result, started_at=started_at)
    return result


def record(result: DrillResult, *, started_at: datetime) -> DrillRecord:
    """Write down that a drill ran against its workflow version and how it ended (the launch check reads it)."""
    workflow = drilled_workflow(result.config)
    return DrillRecord.objects.create(
        workflow_name=workflow.name, workflow_version=workflow.version, topology_fingerprint=workflow.fingerprint,
        points=list(result.config.points), actions=list(drilled_actions(result.config)), runs=result.total("runs"),
        violations=[f"{cell.cell.label}: {'; '.join(cell.violations)}" for cell in result.cells if not cell.ok],
        passed=result.ok, database=connection.vendor, broker=settings.CELERY_BROKER_URL.split("://")[0],
        started_at=started_at, finished_at=timezone.now(),
    )


def run_cell(config: DrillConfig, cell: Cell, number: int, *, account: Any, approver: DrillApprover) -> CellResult:
    started = time.monotonic()
    fault_dir = Path(tempfile.mkdtemp(prefix="durable-drill-faults-"))
    # A queue of its own: no other worker takes the drill's runs, no earlier cell's message lingers.
    queue = f"durable-drill-{uuid.uuid4().hex[:8]}"
    target = load_target(config.target)
    run_ids: list[UUID] = []
    forked: list[UUID] = []
    try:
        reach = target.start()
        with override_settings(**reach, DURABLE_QUEUE=queue, CELERY_TASK_DEFAULT_QUEUE=queue):
            # Keys of this cell alone: an earlier drill's run of the same key may still be active (an UNKNOWN
            # notification waits for an operator), and a workflow may answer a start with that run.
            keyed = target.runs(config.runs_per_cell, tag=f"7{uuid.uuid4().int % 10**8:08d}{number:02d}")
            env = worker_env(cell, fault_dir, {**reach, "DURABLE_SCOPE_CREATED_BY": account.pk,
                                               "DURABLE_QUEUE": queue, "CELERY_TASK_DEFAULT_QUEUE": queue})
            with DrillWorkers(env, config.workers, config.log_dir, cell.label) as workers:
                run_ids = [_start_run(config, key, data, account) for key, data in keyed]

                def tick() -> None:
                    workers.supervise()
                    approver.approve_pending(run_ids)

                wait_for_runs(run_ids, until=SETTLED, timeout=config.timeout, tick=tick)
                before = target.effects()
                forked = fork_completed(run_ids, account, drilled_workflow(config))

                def tick_forks() -> None:
                    workers.supervise()
                    approver.approve_pending(forked)

                wait_for_runs(forked, until=SETTLED, timeout=config.timeout, tick=tick_forks)
            # Counted only once the workers are gone: nothing can take effect after this.
            after = target.effects()
            downstream, counts = measure(cell.action, cell.point, run_ids, crashed=crashed_operations(fault_dir),
                                         crashes=len(list(fault_dir.iterdir())), effects=after)
            counts = replace(counts, **fork_counts(forked, before, after))
            drop_queue(queue)
    finally:
        target.stop()
        shutil.rmtree(fault_dir, ignore_errors=True)
        cancel_unsettled(run_ids + forked)
    violations = judge(counts, expectation(cell.point, capabilities_of(downstream)))
    return CellResult(cell, downstream, counts, tuple(violations), tuple(run_ids), time.monotonic() - started,
                      workers.restarts, tuple(forked))


def worker_env(cell: Cell, fault_dir: Path, overrides: dict[str, Any]) -> dict[str, str]:
    """The environment of the cell's workers: the project's settings under durable.tools.drill_settings, with the
    drill's on top (the same database and broker as this process, and `overrides`), and the cell's fault armed."""
    db = connection.settings_dict
    drilled = {**WORKER_SETTINGS, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
               "DATABASES": {"default": {key: db[key] for key in ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT")}},
               **overrides}
    return {"DJANGO_SETTINGS_MODULE": DRILL_SETTINGS, "DURABLE_DRILL_SETTINGS": settings_module(),
            "DURABLE_DRILL_OVERRIDES": json.dumps(drilled, default=str),
            "DURABLE_FAULT_POINTS": cell.point, "DURABLE_FAULT_ACTIONS": cell.action, "DURABLE_FAULT_DIR": str(fault_dir)}


def _start_run(config: DrillConfig, business_key: str, data: dict[str, Any], account: Any) -> UUID:
    run, _ = services.start_run(workflow=config.workflow, version=config.version, business_key=business_key,
                                input=data, enqueue=True, allow_older_version=True, user=account)
    return run.id


def fork_completed(run_ids: list[UUID], account: Any, workflow: Workflow) -> list[UUID]:
    """A fork of each run that completed, as the drill's account, from the checkpoint before its first business
    action: every side effect again, in a family that performed them all (docs/fault-drill.md, "Forks")."""
    acting = [shape.name for shape in workflow.topology if shape.side_effects]
    forked = []
    for run_id in Run.objects.filter(id__in=run_ids, status=RunStatus.SUCCEEDED).values_list("id", flat=True):
        before = Checkpoint.objects.filter(run_id=run_id, next_step__in=acting).order_by("seq").first()
        if before is not None:
            forked.append(forks.fork_run(run_id=run_id, seq=before.seq, user=account, source="command",
                                         reason="durable_drill: a fork of a completed run performs nothing again").id)
    return forked


def fork_counts(forked: list[UUID], before: dict[str, dict[str, int]],
                after: dict[str, dict[str, int]]) -> dict[str, int]:
    """How many forks there were and settled (a fork's activities run again and may refuse now: an order already
    refunded fails the fork's own check, which is no broken promise), and the effects counted while they ran."""
    def total(effects: dict[str, dict[str, int]]) -> int:
        return sum(n for service in effects.values() for n in service.values())
    settled = Run.objects.filter(id__in=forked, status__in=SETTLED).count()
    return {"forks": len(forked), "forks_settled": settled, "fork_effects": total(after) - total(before)}


def cancel_unsettled(run_ids: list[UUID]) -> None:
    """A run the cell lost must not be resumed later by some other sweeper against stand-ins now gone."""
    for run_id in Run.objects.filter(id__in=run_ids).exclude(status__in=SETTLED).values_list("id", flat=True):
        try:
            services.cancel_run(run_id=run_id, user=None, source="command",
                                reason="durable_drill: the cell timed out; the run is kept as evidence")
        except Conflict:
            pass  # it settled meanwhile


# -- workers ---------------------------------------------------------------


class DrillWorkers:
    """W workers with the cell's fault armed; each sweeps, in turn with the others (only the drill's runs).

    Prefork with one child: when the fault point kills the child, the master forks a new one
    in milliseconds and requeues the message (acks late, reject on worker lost): at once on
    Redis or AMQP; kombu's filesystem broker has no event loop, so there Celery's plain pool
    first waits `worker_lost_wait` (10 s) and the worker takes nothing new meanwhile. A whole
    worker process that exits is replaced by `supervise`. On SQLite the solo pool instead: a
    child forked while the master's sweeper thread holds the database file's write lock inherits
    SQLite's record of that lock and finds the database locked for good ("do not carry a
    connection across fork()"); a solo worker the fault kills is replaced whole by `supervise`.
    """

    def __init__(self, env: dict[str, str], count: int, log_dir: Path | None, label: str) -> None:
        self.env = env
        self.count = count
        self.log_dir = log_dir
        self.label = label
        self.workers: list[WorkerProcess] = []
        self.restarts = 0

    def _new(self, index: int) -> WorkerProcess:
        log_path = self.log_dir / f"drill-{self.label}-{index}.log" if self.log_dir else None
        # Killed with the drill (its fault armed, its sweeper scoped to the drill's account): none outlives it.
        pool = "solo" if connection.vendor == "sqlite" else "prefork"
        return WorkerProcess(env=self.env, log_path=log_path, name=f"drill{index}", pool=pool, concurrency=1,
                             die_with_parent=True)

    def __enter__(self) -> DrillWorkers:
        self.workers = [self._new(i) for i in range(self.count)]
        try:
            for worker in self.workers:  # launched from this thread, which lives as long as the drill
                worker.launch()
            for worker in self.workers:  # each takes seconds to boot Django and Celery, all at once
                worker.wait_ready()
        except BaseException:
            _in_parallel(WorkerProcess.stop, self.workers)
            raise
        return self

    def supervise(self) -> None:
        """Start a new worker in place of any whole worker process that exited."""
        for index, worker in enumerate(self.workers):
            if worker.process is not None and worker.process.poll() is not None:
                self.workers[index] = self._new(index).start()
                self.restarts += 1

    def __exit__(self, *exc: object) -> None:
        _in_parallel(WorkerProcess.stop, self.workers)


def _in_parallel(fn: Callable[[WorkerProcess], object], workers: list[WorkerProcess]) -> None:
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        for future in [pool.submit(fn, worker) for worker in workers]:
            future.result()


def forget(result: DrillResult) -> int:
    """Delete the drill's runs with their ledger rows, approval requests, checkpoints and journals, but for the
    runs the audit trail names (an approval the drill's account decided): it is append-only, and they stay, as
    the bench's approval probes do. Returns how many stayed."""
    run_ids = [run_id for cell in result.cells for run_id in (*cell.run_ids, *cell.fork_ids)]
    audited = set(OperatorAction.objects.filter(run_id__in=run_ids).values_list("run_id", flat=True))
    delete_runs([run_id for run_id in run_ids if run_id not in audited])
    return len(audited)


# -- the matrix ------------------------------------------------------------

# (title, minimum width, alignment): wide enough for every fault point and demo downstream.
COLUMNS = (
    ("fault point", 16, "<"), ("action (downstream)", 26, "<"), ("runs", 4, ">"), ("crashes", 7, ">"),
    ("completed", 9, ">"), ("needs attention", 15, ">"), ("lost", 4, ">"), ("unknown", 7, ">"),
    ("max effects/op", 14, ">"), ("duplicates", 10, ">"), ("verdict", 0, "<"),
)


def banner(config: DrillConfig) -> str:
    broker = settings.CELERY_BROKER_URL.split("://")[0]
    workflow = drilled_workflow(config)
    target = "" if config.target == SANDBOX else f", target {config.target}"
    pooled = f" (connections from a pool of {pool_size()} per process)" if pool_size() else ""
    return (f"durable_drill: {workflow.name} v{workflow.version}, {config.runs_per_cell} run(s) per cell, "
            f"{len(config.points)} fault point(s) x {len(drilled_actions(config))} action(s), {config.workers} "
            f"worker(s), database {connection.vendor}{pooled}, broker {broker}{target}")


def table(columns: tuple[tuple[str, int, str], ...], rows: Iterable[Iterable[object]]) -> list[str]:
    """A fixed-width table of (title, minimum width, alignment) columns: the titles, a rule, a line per row."""
    def line(values: Iterable[object]) -> str:
        return "  ".join(f"{value!s:{align}{width}}" for value, (_, width, align) in zip(values, columns, strict=False)).rstrip()

    return [line(title for title, _, _ in columns), line("-" * max(width, len(title)) for title, width, _ in columns),
            *(line(row) for row in rows)]


def format_matrix(result: DrillResult) -> str:
    """A fixed-width table, one row per cell, then the totals: pasteable into a README."""
    lines = table(COLUMNS, ([cell.cell.point, f"{cell.cell.action} ({cell.downstream})", cell.counts.runs,
                             cell.counts.crashes, cell.counts.completed, cell.counts.needs_attention, cell.counts.lost,
                             cell.counts.unknown, cell.counts.max_effects, cell.counts.duplicates, cell.verdict]
                            for cell in result.cells))
    violated = sum(not cell.ok for cell in result.cells)
    lines += [
        "",
        f"totals: {result.total('runs')} runs, {result.total('crashes')} crash(es) injected, "
        f"{result.approvals_decided} approval(s) decided by the drill's account, "
        f"{result.total('duplicates')} duplicate effect(s), {result.total('lost')} lost, "
        f"{violated} cell(s) in violation",
        f"elapsed: {result.seconds:.1f} s",
    ]
    return "\n".join(lines)
