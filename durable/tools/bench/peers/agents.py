"""The agents workload on the peers (`durable_bench --agents N --compare`): N runs of five model calls, W processes.

The benchmark's process runs the fake model server (the same one durable's runs call) and the peak sampler,
and starts W processes of a peer's runner: the first alone (it creates the peer's tables), then the others.
Each says `ready` on its standard output; the clock starts and each is told `go` on its standard input; the
runner that knows when every run has finished says `done {json}` (DBOS: the first, which enqueues every
workflow and watches its queue; LangGraph: each, for its share of the threads). The wall time is from `go` to
the latest finish a runner reports. Each runner keeps its Postgres connections to a pool of POOL_SIZE.
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from durable.tools.bench.compare import DBOS, NOT_INSTALLED
from durable.tools.bench.figures import AgentsResult
from durable.tools.bench.model_server import ModelServer
from durable.tools.bench.peaks import Peaks
from durable.tools.bench.peers import PROJECT_DIR, installed, reset_schema

LANGGRAPH_ASYNC = "LangGraph (asyncio) + AsyncPostgresSaver"
POOL_SIZE = 10  # Postgres connections per runner process: the server's 100 are everyone's
CALLS = 5
READY_SECONDS = 120.0


@dataclass(frozen=True)
class Runner:
    module: str
    needs: str  # the module it needs installed
    reports: str  # "first": only the first process says done; "each": every process does
    schema: str  # where its tables live in the benchmark's database (dropped after)


AGENT_RUNNERS: dict[str, Runner] = {
    DBOS: Runner("durable.tools.bench.peers.dbos_agents", "dbos", "first", "durable_bench_dbos_agents"),
    LANGGRAPH_ASYNC: Runner("durable.tools.bench.peers.langgraph_agents", "langgraph.checkpoint.postgres.aio", "each",
                            "durable_bench_langgraph_agents"),
}


class Child:
    """One runner process and the lines it prints, read on a thread of their own."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, cwd=PROJECT_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(self.process.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._keep, args=(self.process.stderr,), daemon=True).start()

    @staticmethod
    def _read(stream: IO[str] | None, into: queue.Queue[str | None]) -> None:
        assert stream is not None
        for line in stream:
            into.put(line.strip())
        into.put(None)

    def _keep(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.errors = [*self.errors[-20:], line.rstrip()]

    def expect(self, word: str, deadline: float) -> str:
        """The rest of the first line starting with `word`; RuntimeError if the process ends or time runs out."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"no {word!r} from the runner in time") from None
            if line is None:
                time.sleep(0.2)  # its last error lines
                last = self.errors[-1] if self.errors else f"exit {self.process.poll()}"
                raise RuntimeError(f"the runner ended before {word!r}: {last[:200]}")
            if line.startswith(word):
                return line[len(word):].strip()

    def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def run_agents_peer(system: str, runs: int, call_ms: float, workers: int, worker_runs: int, database_url: str, *,
                    timeout: float, own_backends: Iterable[int] = ()) -> AgentsResult:
    """The agents workload on one peer, in the line durable's is reported in; a line that says why when it
    was not measured."""
    result = AgentsResult(system, runs, CALLS, call_ms, workers,
                          detail=f"{worker_runs} runs in flight per process, a pool of {POOL_SIZE} connections each")
    runner = AGENT_RUNNERS[system]
    if not installed(runner.needs):
        result.note = NOT_INSTALLED
        return result
    children: list[Child] = []
    prefix = f"agents-{uuid.uuid4().hex[:8]}"  # run i is `prefix-i` at the model server, in every runner
    with ModelServer(call_ms) as model:
        def start(index: int) -> Child:
            child = Child([sys.executable, "-m", runner.module, "--runs", str(runs), "--calls", str(CALLS),
                           "--call-ms", str(call_ms),
                           "--model-url", model.url, "--database-url", database_url, "--index", str(index),
                           "--workers", str(workers), "--worker-runs", str(worker_runs),
                           "--pool-size", str(POOL_SIZE), "--prefix", prefix])
            children.append(child)
            return child

        try:
            deadline = time.monotonic() + READY_SECONDS
            start(0).expect("ready", deadline)  # the first makes the peer's tables; then the others start
            for index in range(1, workers):
                start(index)
            for child in children[1:]:
                child.expect("ready", deadline)
            with Peaks(database_url, pids=lambda: [c.process.pid for c in children],
                       own_backends=own_backends) as peaks:
                go = time.time()
                for child in children:
                    child.say(f"go {go}")
                reporters = children if runner.reports == "each" else children[:1]
                deadline = time.monotonic() + timeout
                reports = [json.loads(child.expect("done", deadline)) for child in reporters]
            calls = model.calls()
        except RuntimeError as failed:
            result.note = f"failed: {failed}"
            return result
        finally:
            for child in children:
                child.stop()
            reset_schema(database_url, runner.schema, create=False)
    succeeded = sum(report["succeeded"] for report in reports)
    if succeeded != runs:
        result.note = f"failed: {succeeded} of {runs} runs succeeded ({reports[0].get('error', '')[:200]})"
        return result
    expected = {(f"{prefix}-{i}", step) for i in range(runs) for step in range(1, CALLS + 1)}
    result.seconds = max(report["finished"] for report in reports) - go
    result.connections, result.server_connections = peaks.database_connections, peaks.server_connections
    result.max_connections, result.rss_mb = peaks.max_connections, peaks.rss_mb
    result.made, result.duplicates = calls.total, calls.duplicates
    result.missing = len(expected - calls.per_call.keys())
    return result


# -- the runner's side -----------------------------------------------------------------------------------------

def runner_main(run: Callable[[Any, Callable[[], float]], dict[str, Any] | None]) -> None:
    """A runner's command line: set up, say ready, wait for go, run, and (if it reports) say done with its JSON.

    `run(args, wait_for_go)` sets up, calls `wait_for_go()` (which says ready and returns the clock's start) and
    returns its report, or None when it does not report. Either way the process then stays until it is stopped:
    the others may still be working (a DBOS process serves its queue until then)."""
    import argparse

    parser = argparse.ArgumentParser()
    for name in ("--runs", "--calls", "--index", "--workers", "--worker-runs", "--pool-size"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--call-ms", type=float, required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--prefix", required=True)
    args = parser.parse_args()

    def wait_for_go() -> float:
        print("ready", flush=True)
        line = sys.stdin.readline().split()
        return float(line[1]) if len(line) == 2 and line[0] == "go" else time.time()

    report = run(args, wait_for_go)
    if report is not None:
        print("done " + json.dumps(report), flush=True)
    sys.stdin.readline()  # until stopped (terminated, or its standard input closed)
