"""Where a run's time goes: advance runs in this process, no broker, timing each store call by phase."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from durable.runtime.executor import advance
from durable.store import RunStore, store
from durable.tools.bench.cpu import CpuMeter

PHASES = {
    "claim": "lease claim",
    "resume_point": "read the newest checkpoint",
    "recorded_calls": "read the recorded activity results",
    "commit_step": "step write (checkpoint)",
    "finish": "last step's write (output, release)",
    "prepare_operation": "ledger: prepare an operation (PENDING)",
    "move_operation": "ledger: move it (STARTED, SUCCEEDED)",
}


class TimedStore:
    """A run store that times the calls named in PHASES; every other attribute passes through."""

    def __init__(self, inner: RunStore) -> None:
        self._inner = inner
        self.seconds: dict[str, list[float]] = {phase: [] for phase in PHASES}

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in PHASES:
            return attribute
        return self._timed(name, attribute)

    def _timed(self, phase: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[phase].append(time.perf_counter() - started)

        return timed


@dataclass
class PhaseReport:
    runs: int
    steps: int
    seconds: float
    by_phase: dict[str, list[float]] = field(default_factory=dict)
    cpu: tuple[float, float] = (0.0, 0.0)  # CPU seconds of this process and of its Postgres backend

    def per_run_ms(self, phase: str) -> float:
        return sum(self.by_phase[phase]) / self.runs * 1000

    @property
    def run_ms(self) -> float:
        return self.seconds / self.runs * 1000

    @property
    def rest_per_run_ms(self) -> float:
        """The executor and the step code themselves: what no store call took."""
        return self.run_ms - sum(self.per_run_ms(phase) for phase in PHASES)

    def lines(self) -> list[str]:
        lines = [f"  {'phase':<38} {'calls':>6} {'median ms':>10} {'ms per run':>11}"]
        for phase, label in PHASES.items():
            times = self.by_phase[phase]
            median = statistics.median(times) * 1000 if times else 0.0
            lines.append(f"  {label:<38} {len(times):>6} {median:>10.3f} {self.per_run_ms(phase):>11.2f}")
        lines.append(f"  {'executor and step code':<38} {'':>6} {'':>10} {self.rest_per_run_ms:>11.2f}")
        lines.append(f"  {'a whole run':<38} {'':>6} {'':>10} {self.run_ms:>11.2f}")
        lines.append(f"  steps/s in this process: {self.steps / self.seconds:.1f}")
        per_1000 = 1000 / self.steps
        lines.append(f"  CPU per 1,000 steps: this process {self.cpu[0] * per_1000:.2f} s, "
                     f"its Postgres backend {self.cpu[1] * per_1000:.2f} s")
        return lines


def time_phases(run_ids: Sequence[UUID], steps_per_run: int) -> PhaseReport:
    """Advance each run to its end in this process through a timed store, one after another."""
    timed = TimedStore(store())
    meter = CpuMeter()
    meter.start()
    started = time.perf_counter()
    for run_id in run_ids:
        advance(run_id, store=timed)  # type: ignore[arg-type]  # a RunStore in all but name
    seconds = time.perf_counter() - started
    meter.sample()
    cpu = meter.as_json()
    return PhaseReport(len(run_ids), len(run_ids) * steps_per_run, seconds, timed.seconds,
                       (cpu["worker_cpu"], cpu["backend_cpu"]))
