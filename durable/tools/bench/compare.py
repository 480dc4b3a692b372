"""Comparing systems on one workload: each system's result, the ratios, the tables and the goals."""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass

DURABLE = "durable"  # the documented worker: the threads pool, DURABLE_WORKER_RUNS runs in flight
DURABLE_SOLO = "durable, solo pool (one run at a time)"
DURABLE_IN_PROCESS = "durable, in-process (no broker)"
DBOS = "DBOS Transact"
LANGGRAPH = "LangGraph + PostgresSaver"
FLOOR = "floor: INSERT+COMMIT"
NOT_INSTALLED = "not installed (pip install -e '.[bench]')"


@dataclass
class SystemResult:
    """One system's run of the workload. `note` replaces the numbers when it was not measured."""

    system: str
    steps: int = 0
    seconds: float = 0.0
    step_p50_ms: float = 0.0
    step_p99_ms: float = 0.0
    note: str = ""
    # CPU seconds per 1,000 steps: the process(es) running the steps, and their Postgres backends (None: not measured).
    worker_cpu_per_1000: float | None = None
    backend_cpu_per_1000: float | None = None

    @property
    def measured(self) -> bool:
        return not self.note and self.seconds > 0

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.measured else 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SystemResult:
        return cls(**json.loads(text))


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (1..99) of `values`, inclusive method; 0 for none."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def from_intervals(system: str, *, steps: int, seconds: float, intervals_ms: list[float],
                   cpu: tuple[float, float] | None = None) -> SystemResult:
    """A result from the wall time, the per-step intervals and the CPU seconds (process, backend) a runner measured."""
    result = SystemResult(system, steps, seconds, percentile(intervals_ms, 50), percentile(intervals_ms, 99))
    if cpu is not None and steps:
        result.worker_cpu_per_1000, result.backend_cpu_per_1000 = (seconds_ * 1000 / steps for seconds_ in cpu)
    return result


def ratio(value: float, baseline: float) -> float | None:
    """value / baseline, or None when either was not measured."""
    if value <= 0 or baseline <= 0:
        return None
    return value / baseline


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cpu_text(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def comparison_table(rows: list[SystemResult]) -> list[str]:
    """One line per system: steps/s, per-step p50/p99, steps/s as a ratio of durable's, and CPU
    seconds per 1,000 steps of the process running the steps and of its Postgres backend."""
    baseline = next((r.steps_per_second for r in rows if r.system == DURABLE), 0.0)
    width = max(len(r.system) for r in rows)
    lines = [f"  {'system':<{width}}  {'steps/s':>9}  {'p50 ms':>8}  {'p99 ms':>8}  {'vs durable':>10}  "
             f"{'CPU s/1k steps: process':>23}  {'backend':>7}"]
    for r in rows:
        if not r.measured:
            lines.append(f"  {r.system:<{width}}  {r.note or 'not measured'}")
            continue
        lines.append(f"  {r.system:<{width}}  {r.steps_per_second:>9.1f}  {r.step_p50_ms:>8.2f}  "
                     f"{r.step_p99_ms:>8.2f}  {_ratio_text(ratio(r.steps_per_second, baseline)):>10}  "
                     f"{_cpu_text(r.worker_cpu_per_1000):>23}  {_cpu_text(r.backend_cpu_per_1000):>7}")
    return lines


def scaling_table(by_workers: dict[int, SystemResult]) -> list[str]:
    """durable's steps/s per number of worker processes, and the speedup over the fewest."""
    counts = sorted(by_workers)
    base = by_workers[counts[0]].steps_per_second
    lines = [f"  {'workers':>7}  {'steps/s':>9}  {'p50 ms':>8}  {'p99 ms':>8}  {'speedup':>8}"]
    for w in counts:
        r = by_workers[w]
        lines.append(f"  {w:>7}  {r.steps_per_second:>9.1f}  {r.step_p50_ms:>8.2f}  {r.step_p99_ms:>8.2f}  "
                     f"{_ratio_text(ratio(r.steps_per_second, base)):>8}")
    return lines


@dataclass(frozen=True)
class Goal:
    """durable's steps/s must be at least `factor` times the other system's."""

    other: str
    factor: float

    def verdict(self, rows: list[SystemResult]) -> str:
        found = {r.system: r for r in rows}
        mine, theirs = found.get(DURABLE), found.get(self.other)
        wanted = f"durable >= {self.factor:g} x {self.other}"
        if mine is None or theirs is None or not mine.measured or not theirs.measured:
            return f"  {wanted}: not measured"
        needed = self.factor * theirs.steps_per_second
        met = "met" if mine.steps_per_second >= needed else "MISSED"
        return f"  {wanted}: {met} ({mine.steps_per_second:.0f} vs {needed:.0f} steps/s)"


# Issues 18's and 37's goals: plain steps (phase a), and with one side effect per run (phase b).
GOALS = (Goal(DBOS, 5.0), Goal(LANGGRAPH, 4.0), Goal(FLOOR, 0.75))
SIDE_EFFECT_GOALS = (Goal(LANGGRAPH, 2.5),)


def goal_lines(rows: list[SystemResult], side_effect: bool = False) -> list[str]:
    return [goal.verdict(rows) for goal in (SIDE_EFFECT_GOALS if side_effect else GOALS)]


def median_result(results: list[SystemResult]) -> SystemResult:
    """The repeat with the median steps/s (a whole run, so its percentiles belong to it)."""
    measured = sorted((r for r in results if r.measured), key=lambda r: r.steps_per_second)
    if not measured:
        return results[0]
    return measured[(len(measured) - 1) // 2]


def parse_workers_list(text: str) -> list[int]:
    """`1,2,4` -> [1, 2, 4]; each at least 1."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--workers-list takes worker counts separated by commas, like 1,2,4; got {text!r}") from None
    if not counts or counts[0] < 1:
        raise ValueError(f"--workers-list needs counts of at least 1; got {text!r}")
    return counts

