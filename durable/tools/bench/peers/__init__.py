"""The peers durable is compared with, each run in a process of its own, and what they share:
the workload's arguments, the step clock and the scratch schema."""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from durable.tools.bench.compare import DBOS, FLOOR, LANGGRAPH, NOT_INSTALLED, SystemResult

# system -> (the module that runs it, the module it needs installed)
RUNNERS: dict[str, tuple[str, str]] = {
    DBOS: ("durable.tools.bench.peers.dbos_runner", "dbos"),
    LANGGRAPH: ("durable.tools.bench.peers.langgraph_runner", "langgraph.checkpoint.postgres"),
    FLOOR: ("durable.tools.bench.floor", "psycopg"),
}
PROJECT_DIR = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Workload:
    """R workflows of S trivial steps, then (with `side_effect`) one step calling the downstream."""

    runs: int
    steps: int
    side_effect: bool
    database_url: str

    @property
    def steps_per_run(self) -> int:
        return self.steps + (1 if self.side_effect else 0)

    @property
    def total_steps(self) -> int:
        return self.runs * self.steps_per_run


class StepClock:
    """Time between consecutive step completions of one workflow, read in-process.

    The same quantity as durable's interval between two checkpoints of a run: one step's work
    plus its durable write. The first step of each workflow has no interval (its start would
    include the workflow's own set-up), as with durable's first checkpoint.
    """

    def __init__(self) -> None:
        self.intervals_ms: list[float] = []
        self._last: float | None = None

    def start_workflow(self) -> None:
        self._last = None

    def tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.intervals_ms.append((now - self._last) * 1000)
        self._last = now


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def run_peer(system: str, workload: Workload, *, timeout: float) -> SystemResult:
    """Measure one peer in a fresh process; a row that says why when it cannot be measured."""
    module, needs = RUNNERS[system]
    if not installed(needs):
        return SystemResult(system, note=NOT_INSTALLED)
    command = [sys.executable, "-m", module, "--runs", str(workload.runs), "--steps", str(workload.steps),
               "--database-url", workload.database_url, *(["--side-effect"] if workload.side_effect else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=PROJECT_DIR)
    except subprocess.TimeoutExpired:
        return SystemResult(system, note=f"failed: no result after {timeout:.0f}s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return SystemResult(system, note=f"failed (exit {done.returncode}): {last[:200]}")
    return SystemResult.from_json(lines[-1])


def main(run: Callable[[Workload], SystemResult]) -> None:
    """A runner's command line: the workload in, its result as one JSON line out."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--side-effect", action="store_true")
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    workload = Workload(args.runs, args.steps, args.side_effect, args.database_url)
    print(run(workload).to_json(), flush=True)


def reset_schema(database_url: str, schema: str, *, create: bool = True) -> None:
    """A peer's tables live in a schema of their own in the benchmark's database, emptied each time."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if create:
            conn.execute(f'CREATE SCHEMA "{schema}"')
