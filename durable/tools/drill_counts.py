"""What one cell of the fault drill must show, what it did show, and the verdict.

Counted from the database (runs, the ledger), the fault markers (which operation crashed at which point) and the
stand-ins' own counters (how often each operation took effect, by its Idempotency-Key), once the cell's workers
are gone, so nothing can take effect after the count.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from durable.downstream import get_downstream
from durable.engine.ledger import Capabilities
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from durable.tools.faults import AFTER_DOWNSTREAM, AFTER_STARTED

ENDED = frozenset({RunStatus.SUCCEEDED, RunStatus.NEEDS_ATTENTION})  # what a cell's every run must reach


@dataclass(frozen=True)
class Expectation:
    """How an operation the fault crashed must end, given what its downstream can do."""

    ends_unknown: bool  # the crash left it possibly sent, and nothing can tell
    armed_effects: int  # its effects in the downstream's own counters


def expectation(point: str, capabilities: Capabilities) -> Expectation:
    """Keys or a lookup settle every crash; without either, a crash once STARTED is UNKNOWN."""
    blind = not capabilities.can_settle
    if blind and point in (AFTER_STARTED, AFTER_DOWNSTREAM):
        # After STARTED the request was not sent yet, but the machine cannot know that.
        return Expectation(ends_unknown=True, armed_effects=1 if point == AFTER_DOWNSTREAM else 0)
    return Expectation(ends_unknown=False, armed_effects=1)


@dataclass(frozen=True)
class CellCounts:
    """What one cell's runs did, from the database, the fault markers and the stand-ins' own counters."""

    runs: int
    crashes: int  # fault points that fired: one marker file each (an operation crashes once per point)
    crashed_runs: int  # runs the fault hit at least once
    completed: int
    needs_attention: int
    lost: int  # neither SUCCEEDED nor NEEDS_ATTENTION (nor blocked) when the cell ended
    unknown: int  # UNKNOWN operations, any action
    unknown_settleable: int  # UNKNOWN operations on a downstream with keys or a lookup: never right
    ended_unknown: int  # runs in NEEDS_ATTENTION with an operation of the armed action UNKNOWN
    unsettled: int  # crashed operations of ended runs not SUCCEEDED, though the crash left nothing in doubt
    max_effects: int  # most effects of any crashed operation
    duplicates: int  # operations, any action, that took effect twice or more
    wrong_effects: int  # operations of runs that ended, with an unexpected effect count below two
    blocked: int = 0  # BLOCKED_VERSION: the drill's workers do not run the version the run was started on
    forks: int = 0  # a fork of each run that completed, from its first checkpoint (durable/forks.py)
    forks_settled: int = 0  # ended, or held for an operator: not lost
    fork_effects: int = 0  # effects the stand-ins counted while the forks ran: their family did it all already


def judge(counts: CellCounts, expect: Expectation) -> list[str]:
    """The cell's violations; an empty list means the ledger kept its promises."""
    c = counts
    reasons = []
    if c.duplicates:
        reasons.append(f"{c.duplicates} operation(s) took effect twice")
    if c.lost:
        reasons.append(f"{c.lost} run(s) lost")
    if c.blocked:
        reasons.append(f"{c.blocked} run(s) BLOCKED_VERSION: the drill's workers do not run the drilled version "
                       "(is its module in DURABLE_WORKFLOW_MODULES?)")
    if expect.ends_unknown and c.ended_unknown < c.runs - c.lost - c.blocked:
        reasons.append(f"{c.runs - c.lost - c.blocked - c.ended_unknown} run(s) ended other than UNKNOWN")
    if c.unknown_settleable:
        reasons.append(f"{c.unknown_settleable} UNKNOWN operation(s) where the downstream can tell")
    if not expect.ends_unknown and c.unsettled:
        reasons.append(f"{c.unsettled} crashed operation(s) not SUCCEEDED, though nothing was in doubt")
    if c.wrong_effects:
        reasons.append(f"{c.wrong_effects} operation(s) with the wrong number of effects")
    if c.fork_effects:
        reasons.append(f"forks of completed runs took {c.fork_effects} effect(s) their family had taken")
    if c.forks_settled < c.forks:
        reasons.append(f"{c.forks - c.forks_settled} of {c.forks} fork(s) of completed runs lost")
    if c.crashed_runs < c.runs:  # a run the fault missed proves nothing about recovery
        reasons.append(f"the fault fired in only {c.crashed_runs} of {c.runs} run(s)")
    return reasons


@dataclass(frozen=True)
class Operation:
    """One ledger row of the cell's runs, as counted."""

    operation_id: str
    run_id: UUID
    action: str
    downstream: str
    status: str


def crashed_operations(fault_dir: Path) -> set[str]:
    """The operations a fault point crashed: its markers are named `<operation id>.<point>` (durable.tools.faults)."""
    return {marker.name.partition(".")[0] for marker in fault_dir.iterdir()}


def measure(action: str, point: str, run_ids: Iterable[UUID], *, crashed: Collection[str], crashes: int,
            effects: dict[str, dict[str, int]]) -> tuple[str, CellCounts]:
    """The armed action's downstream and the cell's counts; `effects` is the target's effects()."""
    runs = dict(Run.objects.filter(id__in=list(run_ids)).values_list("id", "status"))
    ledger = [Operation(*row) for row in SideEffect.objects.filter(run_id__in=list(runs)).values_list(
        "operation_id", "run_id", "action_name", "downstream", "status")]
    hit = [op for op in ledger if op.action == action and op.operation_id in crashed]
    hit_ids = {op.operation_id for op in hit}
    downstream = next((op.downstream for op in ledger if op.action == action), "?")
    expect = expectation(point, capabilities_of(downstream))
    ended = {run_id for run_id, status in runs.items() if status in ENDED}

    def took(op: Operation) -> int:
        return effects.get(op.downstream, {}).get(op.operation_id, 0)

    def wrong(op: Operation) -> bool:
        if op.operation_id in hit_ids:
            return took(op) != expect.armed_effects
        # Another operation: done once if the ledger says it succeeded. One the crash left unsent, or in doubt on
        # a downstream that cannot tell (a parallel call in flight beside the crashed one), took effect 0 or 1 times.
        return op.status == Op.SUCCEEDED and took(op) != 1

    return downstream, CellCounts(
        runs=len(runs), crashes=crashes, crashed_runs=len({op.run_id for op in hit}),
        completed=sum(status == RunStatus.SUCCEEDED for status in runs.values()),
        needs_attention=sum(status == RunStatus.NEEDS_ATTENTION for status in runs.values()),
        lost=sum(status not in ENDED and status != RunStatus.BLOCKED_VERSION for status in runs.values()),
        blocked=sum(status == RunStatus.BLOCKED_VERSION for status in runs.values()),
        unknown=sum(op.status == Op.UNKNOWN for op in ledger),
        unknown_settleable=sum(op.status == Op.UNKNOWN and capabilities_of(op.downstream).can_settle
                               for op in ledger),
        # The crashed operation, or one sent beside it in a parallel group that the run re-entered first.
        ended_unknown=len({op.run_id for op in ledger if op.action == action and op.status == Op.UNKNOWN
                           and runs[op.run_id] == RunStatus.NEEDS_ATTENTION}),
        unsettled=sum(op.run_id in ended and op.status != Op.SUCCEEDED for op in hit),
        max_effects=max((took(op) for op in hit), default=0),
        duplicates=sum(n > 1 for service in effects.values() for n in service.values()),
        wrong_effects=sum(op.run_id in ended and took(op) < 2 and wrong(op) for op in ledger),
    )


def capabilities_of(downstream: str) -> Capabilities:
    adapter = get_downstream(downstream)
    return adapter.capabilities if adapter is not None else Capabilities()
