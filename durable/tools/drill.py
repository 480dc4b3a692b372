"""The fault drill: crash real workers at each fault point, per downstream kind, and count what happened twice."""
from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from durable.errors import Conflict
from durable import services
from durable.runtime.dispatch import drop_queue
from durable.downstream import get_downstream
from durable.engine.ids import operation_id
from durable.engine.ledger import Capabilities
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.engine import step_source
from durable.tools.faults import AFTER_DOWNSTREAM, AFTER_STARTED, FAULT_POINTS
from durable.models import DrillRecord, Run, SideEffect
from durable.tools.processes import WorkerProcess
from durable.registry import UnknownWorkflow, registry
from durable.tools.sandbox import SandboxServer
from durable.workflow import Workflow
from durable.tools.workload import delete_runs, retire, scope_env, tool_account, wait_for_runs

DEFAULT_ACTIONS = ("refund", "ticket", "notify")
# Short lease, sweep and grace: a crashed run is rescued within seconds instead of minutes.
DRILL_ENV = {
    "DURABLE_LEASE_SECONDS": "2",
    "DURABLE_SWEEP_SECONDS": "1",
    "DURABLE_PENDING_GRACE_SECONDS": "2",
    "DURABLE_HTTP_TIMEOUT_SECONDS": "1",  # at most half the lease (durable.E014)
}
SETTLED = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.NEEDS_ATTENTION})


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
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    workers: int = 2
    workflow: str = "claims-agent"
    # Version 1 goes straight through its side effects; version 2 would wait days for a human.
    version: int | None = 1
    timeout: float = 300.0  # per cell, from the moment its runs are started
    log_dir: Path | None = None

    def cells(self) -> list[Cell]:
        return [Cell(point, action) for point in self.points for action in self.actions]


def validate(config: DrillConfig) -> None:
    """Refuse a drill that cannot mean anything, saying which option to fix."""
    if config.runs_per_cell < 1 or config.workers < 1:
        raise ValueError("--runs-per-cell and --workers must be at least 1")
    unknown_points = sorted(set(config.points) - set(FAULT_POINTS))
    if unknown_points or not config.points:
        raise ValueError(f"--points must name fault points among {', '.join(FAULT_POINTS)}; got {unknown_points}")
    try:
        workflow = drilled_workflow(config)
    except UnknownWorkflow as exc:
        raise ValueError(f"--workflow: {exc}") from None
    declared = {action for step in workflow.steps for action in step.side_effects}
    undeclared = sorted(set(config.actions) - declared)
    if undeclared or not config.actions:
        raise ValueError(f"--actions must be side effects {config.workflow} declares ({', '.join(sorted(declared))}); "
                         f"got {undeclared}")
    asking = steps_that_ask(workflow)
    if asking:
        raise ValueError(f"{workflow.name} v{workflow.version} waits for a human at step(s) {', '.join(asking)}, and "
                         "the drill does not approve, so its runs would never settle; choose a version without "
                         "approvals with --workflow-version")


def drilled_workflow(config: DrillConfig) -> Workflow:
    """The version the drill starts its runs on: the one named, or the newest."""
    if config.version is None:
        return registry.latest(config.workflow)
    return registry.get(config.workflow, config.version)


def steps_that_ask(workflow: Workflow) -> list[str]:
    """Steps whose own source asks for an approval (a step whose source cannot be read is not counted)."""
    return step_source.steps_that_ask(workflow.steps)


# -- what a cell must show -------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """How every run of a cell must end, given what the armed action's downstream can do."""

    ends_unknown: bool  # the crash left the operation possibly sent, and nothing can tell
    armed_effects: int  # effects of the armed operation in the downstream's own counters


def expectation(point: str, capabilities: Capabilities) -> Expectation:
    """Keys or a lookup settle every crash; without either, a crash once STARTED is UNKNOWN."""
    blind = not capabilities.can_settle
    if blind and point in (AFTER_STARTED, AFTER_DOWNSTREAM):
        # After STARTED the request was not sent yet, but the machine cannot know that.
        return Expectation(ends_unknown=True, armed_effects=1 if point == AFTER_DOWNSTREAM else 0)
    return Expectation(ends_unknown=False, armed_effects=1)


@dataclass(frozen=True)
class CellCounts:
    """What one cell's runs did, from the database and the sandbox's own counters."""

    runs: int
    crashes: int  # fault points that fired: one marker file each
    completed: int
    needs_attention: int
    lost: int  # neither SUCCEEDED nor NEEDS_ATTENTION when the cell ended
    unknown: int  # UNKNOWN operations, any action
    ended_unknown: int  # runs in NEEDS_ATTENTION with the armed operation UNKNOWN
    max_effects: int  # most effects of any one armed operation
    duplicates: int  # operations, any action, that took effect twice or more
    wrong_effects: int  # operations of runs that ended, with an unexpected effect count below two


def judge(counts: CellCounts, expect: Expectation) -> list[str]:
    """The cell's violations; an empty list means the ledger kept its promises."""
    c = counts
    reasons = []
    if c.duplicates:
        reasons.append(f"{c.duplicates} operation(s) took effect twice")
    if c.lost:
        reasons.append(f"{c.lost} run(s) lost")
    if expect.ends_unknown and c.ended_unknown < c.runs - c.lost:
        reasons.append(f"{c.runs - c.lost - c.ended_unknown} run(s) ended other than UNKNOWN")
    if not expect.ends_unknown and c.unknown:
        reasons.append(f"{c.unknown} UNKNOWN operation(s) where the downstream can tell")
    if c.wrong_effects:
        reasons.append(f"{c.wrong_effects} operation(s) with the wrong number of effects")
    if c.crashes < c.runs:  # a run the fault missed proves nothing about recovery
        reasons.append(f"the fault fired in only {c.crashes} of {c.runs} run(s)")
    return reasons


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    downstream: str
    counts: CellCounts
    violations: tuple[str, ...]
    run_ids: tuple[UUID, ...]
    seconds: float
    worker_restarts: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def verdict(self) -> str:
        return "ok" if self.ok else "VIOLATION: " + "; ".join(self.violations)


@dataclass(frozen=True)
class DrillResult:
    config: DrillConfig
    cells: tuple[CellResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return all(cell.ok for cell in self.cells)

    def total(self, name: str) -> int:
        return sum(getattr(cell.counts, name) for cell in self.cells)


# -- running a drill -------------------------------------------------------


def run_drill(config: DrillConfig, *, on_cell: Callable[[CellResult], None] | None = None) -> DrillResult:
    """Every cell in turn, each with fresh workers, sandbox, queue and fault markers.

    The drill starts its runs as an account of its own and its workers sweep only that account's
    runs, on a queue of their own: pointed at a database other runs live in, it touches none of them."""
    validate(config)
    started, started_at = time.monotonic(), timezone.now()
    results = []
    account = tool_account("drill")
    try:
        for number, cell in enumerate(config.cells(), start=1):
            results.append(run_cell(config, cell, number, account=account))
            if on_cell is not None:
                on_cell(results[-1])
    finally:
        retire(account)
    result = DrillResult(config, tuple(results), time.monotonic() - started)
    record(result, started_at=started_at)
    return result


def record(result: DrillResult, *, started_at: datetime) -> DrillRecord:
    """Write down that a drill ran against its workflow version and how it ended (the launch check reads it)."""
    workflow = drilled_workflow(result.config)
    return DrillRecord.objects.create(
        workflow_name=workflow.name, workflow_version=workflow.version, topology_fingerprint=workflow.fingerprint,
        points=list(result.config.points), actions=list(result.config.actions), runs=result.total("runs"),
        violations=[f"{cell.cell.label}: {'; '.join(cell.violations)}" for cell in result.cells if not cell.ok],
        passed=result.ok, database=connection.vendor, broker=settings.CELERY_BROKER_URL.split("://")[0],
        started_at=started_at, finished_at=timezone.now(),
    )


def run_cell(config: DrillConfig, cell: Cell, number: int, *, account: User) -> CellResult:
    started = time.monotonic()
    fault_dir = Path(tempfile.mkdtemp(prefix="durable-drill-faults-"))
    # A queue of its own: no other worker takes the drill's runs, no earlier cell's message lingers.
    queue = f"durable-drill-{uuid.uuid4().hex[:8]}"
    try:
        with SandboxServer() as sandbox, \
                override_settings(DURABLE_SANDBOX_URL=sandbox.url, CELERY_TASK_DEFAULT_QUEUE=queue):
            # Order ids of this cell alone: an earlier drill's run of the same order may still be active (an
            # UNKNOWN notification waits for an operator), and the claims agent answers a start with that run.
            orders = seed_orders(sandbox, f"ORD-7{uuid.uuid4().int % 10**8:08d}{number:02d}", config.runs_per_cell)
            env = {**DRILL_ENV, **scope_env(account), "DURABLE_FAULT_POINTS": cell.point,
                   "DURABLE_FAULT_ACTIONS": cell.action, "DURABLE_FAULT_DIR": str(fault_dir)}
            with DrillWorkers(env, config.workers, config.log_dir, cell.label) as workers:
                run_ids = [_start_run(config.workflow, config.version, order_id, account) for order_id in orders]
                wait_for_runs(run_ids, until=SETTLED, timeout=config.timeout, tick=workers.supervise)
            # Counted only once the workers are gone: nothing can take effect after this.
            downstream, counts = measure(cell, run_ids, crashes=len(list(fault_dir.iterdir())),
                                         effects=sandbox.state.calls_snapshot())
            drop_queue(queue)
    finally:
        shutil.rmtree(fault_dir, ignore_errors=True)
    cancel_unsettled(run_ids)
    violations = judge(counts, expectation(cell.point, capabilities_of(downstream)))
    return CellResult(cell, downstream, counts, tuple(violations), tuple(run_ids), time.monotonic() - started,
                      workers.restarts)


def seed_orders(sandbox: SandboxServer, prefix: str, runs: int) -> list[str]:
    """One order per run, so each run has business keys of its own."""
    orders = [f"{prefix}{i:05d}" for i in range(runs)]
    for i, order_id in enumerate(orders):
        sandbox.state.upsert_order({"order_id": order_id, "customer": f"Drill Customer {i}", "amount": "40.00",
                                    "currency": "EUR"})
    return orders


def _start_run(workflow: str, version: int | None, order_id: str, account: User) -> UUID:
    run, _ = services.start_run(workflow=workflow, version=version, business_key=order_id, enqueue=True, input={
        "order_id": order_id, "customer_message": f"{order_id} arrived broken, please refund it",
    }, allow_older_version=True, user=account)
    return run.id


def cancel_unsettled(run_ids: list[UUID]) -> None:
    """A run the cell lost must not be resumed later by some other sweeper against a sandbox now gone."""
    for run_id in Run.objects.filter(id__in=run_ids).exclude(status__in=SETTLED).values_list("id", flat=True):
        try:
            services.cancel_run(run_id=run_id, user=None, source="command",
                                reason="durable_drill: the cell timed out; the run is kept as evidence")
        except Conflict:
            pass  # it settled meanwhile


def capabilities_of(downstream: str) -> Capabilities:
    adapter = get_downstream(downstream)
    return adapter.capabilities if adapter is not None else Capabilities()


# -- counting --------------------------------------------------------------


def measure(cell: Cell, run_ids: Iterable[UUID], *, crashes: int,
            effects: dict[str, dict[str, Any]]) -> tuple[str, CellCounts]:
    """The armed action's downstream and the cell's counts; `effects` is the sandbox's calls_snapshot()."""
    runs = list(Run.objects.filter(id__in=list(run_ids)).values_list("id", "business_key", "status"))
    ledger = list(SideEffect.objects.filter(run_id__in=[run_id for run_id, _, _ in runs])
                  .values_list("operation_id", "run_id", "action_name", "downstream", "status"))
    armed = {run_id: status for _, run_id, action, _, status in ledger if action == cell.action}
    downstream = next((service for _, _, action, service, _ in ledger if action == cell.action), "?")
    expect = expectation(cell.point, capabilities_of(downstream))
    ended = {run_id for run_id, _, status in runs if status in (RunStatus.SUCCEEDED, RunStatus.NEEDS_ATTENTION)}
    completed = sum(status == RunStatus.SUCCEEDED for *_, status in runs)
    attention = len(ended) - completed
    # Effects are keyed by the operation id, the Idempotency-Key every adapter sends.
    armed_effects = [effects_of(effects, downstream, operation_id(str(run_id), cell.action, key))
                     for run_id, key, _ in runs]
    wrong = [op_id for op_id, run_id, action, service, _ in ledger if run_id in ended
             and effects_of(effects, service, op_id) < 2  # two or more are counted as duplicates
             and effects_of(effects, service, op_id) != (expect.armed_effects if action == cell.action else 1)]
    return downstream, CellCounts(
        runs=len(runs), crashes=crashes, completed=completed, needs_attention=attention, lost=len(runs) - len(ended),
        unknown=sum(status == Op.UNKNOWN for *_, status in ledger),
        ended_unknown=sum(status == RunStatus.NEEDS_ATTENTION and armed.get(run_id) == Op.UNKNOWN
                          for run_id, _, status in runs),
        max_effects=max(armed_effects, default=0),
        duplicates=sum(n > 1 for service in effects.values() for n in service["effects_by_key"].values()),
        wrong_effects=len(wrong),
    )


def effects_of(effects: dict[str, dict[str, Any]], service: str, op_id: str) -> int:
    return effects.get(service, {}).get("effects_by_key", {}).get(op_id, 0)


# -- workers ---------------------------------------------------------------


class DrillWorkers:
    """W prefork workers with the cell's fault armed; the first also runs beat, the sweeper.

    Prefork with one child: when the fault point kills the child, the master forks a new one
    in milliseconds and requeues the message (acks late, reject on worker lost): at once on
    Redis or AMQP; kombu's filesystem broker has no event loop, so there Celery's plain pool
    first waits `worker_lost_wait` (10 s) and the worker takes nothing new meanwhile. A whole
    worker process that exits is replaced by `supervise`.
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
        return WorkerProcess(env=self.env, beat=index == 0, log_path=log_path, name=f"drill{index}",
                             pool="prefork", concurrency=1)

    def __enter__(self) -> DrillWorkers:
        self.workers = [self._new(i) for i in range(self.count)]
        try:
            _in_parallel(WorkerProcess.start, self.workers)  # each takes seconds to boot Django and Celery
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


def forget(result: DrillResult) -> None:
    """Delete the drill's runs, their ledger rows, checkpoints and journals."""
    delete_runs([run_id for cell in result.cells for run_id in cell.run_ids])


# -- the matrix ------------------------------------------------------------

# (title, minimum width, alignment): wide enough for every fault point and demo downstream.
COLUMNS = (
    ("fault point", 16, "<"), ("action (downstream)", 26, "<"), ("runs", 4, ">"), ("crashes", 7, ">"),
    ("completed", 9, ">"), ("needs attention", 15, ">"), ("lost", 4, ">"), ("unknown", 7, ">"),
    ("max effects/op", 14, ">"), ("duplicates", 10, ">"), ("verdict", 0, "<"),
)


def banner(config: DrillConfig) -> str:
    broker = settings.CELERY_BROKER_URL.split("://")[0]
    return (f"durable_drill: {config.workflow}, {config.runs_per_cell} run(s) per cell, {len(config.points)} fault "
            f"point(s) x {len(config.actions)} action(s), {config.workers} worker(s), database {connection.vendor}, "
            f"broker {broker}")


def _row(values: Iterable[object]) -> str:
    cells = [f"{value!s:{align}{width}}" for value, (_, width, align) in zip(values, COLUMNS)]
    return "  ".join(cells).rstrip()


def format_matrix(result: DrillResult) -> str:
    """A fixed-width table, one row per cell, then the totals: pasteable into a README."""
    lines = [_row(title for title, _, _ in COLUMNS), _row("-" * max(width, len(title)) for title, width, _ in COLUMNS)]
    for cell in result.cells:
        c = cell.counts
        lines.append(_row([cell.cell.point, f"{cell.cell.action} ({cell.downstream})", c.runs, c.crashes, c.completed,
                           c.needs_attention, c.lost, c.unknown, c.max_effects, c.duplicates, cell.verdict]))
    violated = sum(not cell.ok for cell in result.cells)
    lines += [
        "",
        f"totals: {result.total('runs')} runs, {result.total('crashes')} crash-injected, "
        f"{result.total('duplicates')} duplicate effect(s), {result.total('lost')} lost, "
        f"{violated} cell(s) in violation",
        f"elapsed: {result.seconds:.1f} s",
    ]
    return "\n".join(lines)
