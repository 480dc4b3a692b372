"""Many agents at once on real workers (`durable_bench --agents N`, `--rate-limit R`): the harness.

It creates the runs first (as an account of its own, not enqueued), starts the fake model server and W real
`celery worker` processes with the pool and concurrency asked for (the environment passed through, so the same
command measures whatever worker the code has), then starts the clock and enqueues every run, and waits until
every run SUCCEEDED. Meanwhile it samples the Postgres connections and the workers' memory (peaks.py), and
stops the workers at once if the server's connections run out (or a worker's log says it was refused one):
then it reports the runs' statuses instead of hanging. The wall time is from just before the first run is
enqueued to the newest run's `finished_at`.

Before starting, it refuses a load whose connections would not fit what the server has free: today's worker
holds a connection per thread for the whole run (issue 37), so `--pool threads --worker-runs N` needs N of them
per worker; a worker with a connection pool (`DURABLE_DB_POOL_SIZE`) needs its pool's size.
"""
from __future__ import annotations

import json
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max
from django.utils import timezone

from durable import services
from durable.conf import SETTINGS, durable_settings
from durable.engine.states import RunStatus
from durable.models import Run
from durable.runtime import dispatch
from durable.tools.bench.agents import CALLS, agents_workflow, expected_calls
from durable.tools.bench.compare import DURABLE
from durable.tools.bench.cpu import process_cpu_seconds
from durable.tools.bench.figures import AgentsResult
from durable.tools.bench.model_server import Calls, ModelServer
from durable.tools.bench.peaks import Peaks
from durable.tools.processes import WorkerProcess, database_url
from durable.tools.workload import delete_runs, retire, scope_env, tool_account

MARGIN_CONNECTIONS = 10  # left free for the other clients of the server
OVERHEAD_CONNECTIONS = 3  # a worker's own beside its runs' (the heartbeat's, the sweeper's, the main thread's)
POLL_SECONDS = 0.25  # how often the benchmark looks whether every run SUCCEEDED (the clock stops at finished_at)
REFUSED = "too many clients"  # Postgres' FATAL when its connections ran out


class Stopped(Exception):
    """The benchmark stopped its workers before every run finished; the message says why."""


@dataclass
class Fleet:
    """How the workers run: their number, Celery pool, runs in flight each, and environment."""

    workers: int
    pool: str = "threads"
    worker_runs: int = 1
    db_pool_size: int | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def pool_size(self) -> int:
        """The workers' connection pool (issue 37's DURABLE_DB_POOL_SIZE: given, or the code's setting); 0: none,
        a connection per thread (code before that setting, or the setting 0)."""
        if self.db_pool_size is not None:
            return self.db_pool_size
        return int(getattr(durable_settings, "DURABLE_DB_POOL_SIZE", 0) or 0) if "DURABLE_DB_POOL_SIZE" in SETTINGS else 0

    @property
    def pooled(self) -> bool:
        return self.pool_size > 0

    def connections_each(self) -> int:
        """The most connections one worker process may open for this load."""
        if self.pooled:
            return self.pool_size + OVERHEAD_CONNECTIONS
        return (1 if self.pool == "solo" else self.worker_runs) + OVERHEAD_CONNECTIONS

    def describe(self) -> str:
        runs = "1 run" if self.pool == "solo" else f"{self.worker_runs} runs"
        pool = f", a connection pool of {self.pool_size} each" if self.pooled else ", a connection per thread"
        return f"pool {self.pool}, {runs} in flight per worker{pool}"

    def worker_env(self) -> dict[str, str]:
        env = dict(self.env)
        if self.pool != "solo":
            env.setdefault("DURABLE_WORKER_RUNS", str(self.worker_runs))
        if self.db_pool_size:
            env.setdefault("DURABLE_DB_POOL_SIZE", str(self.db_pool_size))
        return env

    def processes(self, env: dict[str, str], name: str) -> list[WorkerProcess]:
        logs = settings.VAR_DIR / "logs"
        logs.mkdir(exist_ok=True)
        concurrency = 1 if self.pool == "solo" else self.worker_runs
        return [WorkerProcess(env=env, name=f"{name}{i}", log_path=logs / f"{name}-worker-{i}.log", pool=self.pool,
                              concurrency=concurrency) for i in range(self.workers)]


def free_connections() -> tuple[int, int]:
    """(connections the server has free now, its max_connections)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int, count(*) FROM pg_stat_activity "
                       "WHERE backend_type = 'client backend'")
        most, used = cursor.fetchone()
    return most - used, most


def check_fits(fleet: Fleet) -> None:
    """Refuse a load whose connections would not fit what the server has free (less a margin for others)."""
    free, most = free_connections()
    need = fleet.workers * fleet.connections_each()
    if need > free - MARGIN_CONNECTIONS:
        how = (f"a connection pool of {fleet.pool_size}" if fleet.pooled else
               "one connection per run in flight (today's worker holds a connection per thread)")
        raise Stopped(f"{fleet.workers} worker(s) with {fleet.describe()} may open {need} connections ({how}, "
                      f"+{OVERHEAD_CONNECTIONS} each), and the server has {free} of {most} free (keeping "
                      f"{MARGIN_CONNECTIONS} for its other clients): lower --worker-runs or --workers")


def raise_open_files() -> None:
    """Thousands of calls in flight are thousands of sockets, here and in the workers (which inherit this)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def statuses(run_ids: list[UUID]) -> str:
    counts = dict(Run.objects.filter(id__in=run_ids).values_list("status").annotate(n=Count("id")))
    return ", ".join(f"{status} {counts[status]}" for status in sorted(counts))


def start_runs(workflow: str, count: int, account: Any) -> list[UUID]:
    return [services.start_run(workflow=workflow, input={}, business_key=f"{workflow}-{i}", enqueue=False,
                               user=account)[0].id for i in range(count)]


class LogWatch:
    """Reads what the workers' log files gained, looking for Postgres refusing a connection."""

    def __init__(self, paths: list[Path]) -> None:
        self.offsets = {path: path.stat().st_size if path.exists() else 0 for path in paths}
        self.refused = ""

    def check(self) -> str:
        for path, offset in self.offsets.items():
            if not path.exists():
                continue
            with path.open("rb") as log:
                log.seek(offset)
                gained = log.read()
            self.offsets[path] = offset + len(gained)
            for line in gained.decode(errors="replace").splitlines():
                if REFUSED in line and not self.refused:
                    self.refused = line.strip()[:200]
        return self.refused


@dataclass
class Outcome:
    run_ids: list[UUID]
    seconds: float
    calls: Calls
    peaks: Peaks
    server_cpu_seconds: float = 0.0  # the fake model server's, while the runs ran
    bench_cpu_seconds: float = 0.0  # the benchmark's whole process (the server, the sampler, the enqueue, polls)
    clock: float = 0.0  # time.monotonic() as the clock started (the fake server's arrivals are on that clock)


def run_fleet(workflow: str, runs: int, call_ms: float, fleet: Fleet, timeout: float, *, name: str,
              env: dict[str, str] | None = None, keep: bool = False) -> Outcome:
    """Run `runs` runs of `workflow` on the fleet against a fake model answering after `call_ms`; Stopped
    (with the runs' statuses) when they did not all succeed."""
    check_fits(fleet)
    raise_open_files()
    account = tool_account(name)
    run_ids = start_runs(workflow, runs, account)
    try:
        with ModelServer(call_ms) as model:
            worker_env = {
                **scope_env(account), **fleet.worker_env(), **(env or {}),
                "DURABLE_WORKFLOW_MODULES": ",".join([*durable_settings.DURABLE_WORKFLOW_MODULES,
                                                      "durable.tools.bench.agents"]),
                "DURABLE_BENCH_MODEL_URL": model.url,
                # The backlog is made on purpose (every run enqueued at once): a run waiting its turn has not lost
                # its message, so the sweeper must not send it again. Expired leases and due retries it still takes.
                "DURABLE_PENDING_GRACE_SECONDS": str(max(timeout, 60.0)),
            }
            workers = fleet.processes(worker_env, name)
            watch = LogWatch([w.log_path for w in workers if w.log_path])
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                own = [cursor.fetchone()[0]]
            try:
                for worker in workers:
                    worker.start()
                with Peaks(database_url(), pids=lambda: [w.pid for w in workers], own_backends=own) as peaks:
                    server_cpu, bench_cpu = model.cpu_seconds(), process_cpu_seconds() or 0.0
                    started, clock = timezone.now(), time.monotonic()
                    for run_id in run_ids:
                        dispatch.enqueue(run_id)
                    unfinished = wait_until_succeeded(account, run_ids, timeout, _stop_if_refused(peaks, watch, workers))
                    server_cpu = model.cpu_seconds() - server_cpu
                    bench_cpu = (process_cpu_seconds() or 0.0) - bench_cpu
            except Stopped as stopped:
                raise Stopped(f"{stopped}; runs: {statuses(run_ids)}; {_calls_said(model.calls(), run_ids)}") from None
            finally:
                for worker in workers:
                    worker.stop()
            calls = model.calls()
            if unfinished:
                raise Stopped(f"{unfinished} of {runs} runs not SUCCEEDED after {timeout:.0f} s; runs: "
                              f"{statuses(run_ids)}; {_calls_said(calls, run_ids)} (worker logs: "
                              f"{settings.VAR_DIR / 'logs'}/{name}-worker-*.log)")
        newest = Run.objects.filter(id__in=run_ids).aggregate(newest=Max("finished_at"))["newest"]
        return Outcome(run_ids, (newest - started).total_seconds(), calls, peaks, server_cpu, bench_cpu,
                       clock)
    finally:
        retire(account)
        if not keep:
            delete_runs(run_ids)
            account.delete()


def wait_until_succeeded(account: Any, run_ids: list[UUID], timeout: float, tick: Callable[[], None]) -> int:
    """Poll until every run SUCCEEDED, or the timeout; returns how many did not. It asks by the runs' account
    (an index) every POLL_SECONDS: a poll naming thousands of run ids cost the benchmark's process and Postgres
    more CPU than the fake model server serving every call."""
    deadline = time.monotonic() + timeout
    waiting = Run.objects.filter(created_by=account).exclude(status=RunStatus.SUCCEEDED)
    while waiting.exists() and time.monotonic() < deadline:
        tick()
        time.sleep(POLL_SECONDS)
    return Run.objects.filter(id__in=run_ids).exclude(status=RunStatus.SUCCEEDED).count()


def _stop_if_refused(peaks: Peaks, watch: LogWatch, workers: list[WorkerProcess]) -> Callable[[], None]:
    def tick() -> None:
        refused = watch.check()
        if peaks.exhausted or refused:
            for worker in workers:
                worker.kill()  # at once: every other client of the server is refused meanwhile
            why = refused or f"{peaks.server_connections} of {peaks.max_connections}"
            raise Stopped(f"stopped the workers: the server's connections ran out ({why}; peak for this database "
                          f"{peaks.database_connections})")

    return tick


def _calls_said(calls: Calls, run_ids: list[UUID]) -> str:
    expected = expected_calls([str(run_id) for run_id in run_ids])
    return f"{calls.total} model calls made, {calls.duplicates} duplicates, {calls.missing(expected)} not made"


def measure_agents(runs: int, call_ms: float, fleet: Fleet, timeout: float, keep: bool = False) -> AgentsResult:
    """`durable_bench --agents N`: every run of `bench-agents` SUCCEEDED, timed, with its peaks and its calls."""
    workflow = agents_workflow().name
    done = run_fleet(workflow, runs, call_ms, fleet, timeout, name="bench-agents", keep=keep)
    expected = expected_calls([str(run_id) for run_id in done.run_ids])
    return AgentsResult(DURABLE, runs, CALLS, call_ms, fleet.workers, seconds=done.seconds,
                        connections=done.peaks.database_connections,
                        server_connections=done.peaks.server_connections,
                        max_connections=done.peaks.max_connections, rss_mb=done.peaks.rss_mb, made=done.calls.total,
                        duplicates=done.calls.duplicates, missing=done.calls.missing(expected),
                        detail=f"{fleet.describe()}; {cpu_said(done, runs * CALLS)}; {pace_said(done)}")


def cpu_said(done: Outcome, steps: int) -> str:
    """The CPU the workers and the fake server used, in all and per step (less noisy than the wall time)."""
    def each(seconds: float) -> str:
        return f"{seconds:.1f} s ({seconds / steps * 1000:.2f} ms a step)"

    return (f"CPU: workers {each(done.peaks.cpu_seconds)}, Postgres backends {each(done.peaks.backend_cpu_seconds)}, "
            f"the benchmark's process {each(done.bench_cpu_seconds)}, of which the fake model server "
            f"{each(done.server_cpu_seconds)}")


def pace_said(done: Outcome) -> str:
    """When the runs made their first call (their start: enqueue, claim, first step), and how long after one
    call of a run its next one came (a step's own cost and its wait for the CPU, beside the call itself)."""
    first = done.calls.first_arrival
    starts = sorted(at - done.clock for (_run, step), at in first.items() if step == 1)
    gaps = sorted(at - first[(run, step - 1)] for (run, step), at in first.items() if (run, step - 1) in first)
    if not starts or not gaps:
        return "no calls"
    return (f"first calls {_quantiles(starts)} s after the clock, each next call of a run {_quantiles(gaps)} s "
            "after its last")


def _quantiles(values: list[float]) -> str:
    """p50 / p90 / max of sorted values."""
    p50, p90 = values[len(values) // 2], values[min(len(values) - 1, len(values) * 9 // 10)]
    return f"p50 {p50:.1f} / p90 {p90:.1f} / max {values[-1]:.1f}"


def default_worker_runs(runs: int, workers: int) -> int:
    """Enough runs in flight per worker for every run to be in flight at once."""
    return max(1, math.ceil(runs / workers))


def limits_env(rate: str) -> dict[str, str]:
    from durable.tools.bench.agents import LIMIT

    return {"DURABLE_LIMITS": json.dumps({LIMIT: {"rate": rate}})}
