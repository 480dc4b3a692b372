"""The scale-out test: web and worker processes side by side on one Postgres and one broker, crashing at random.

Runs are started through the API of several gunicorn processes (some start requests sent twice
with the same Idempotency-Key, as a client retrying would). Several prefork workers advance them
with every fault point armed at a random fraction of operations, transient downstream errors
(429, 503) injected at random, and every broker message delivered twice. At the end nothing may
have taken effect twice, no run may be lost, and each run must end where its crashes say it must:
SUCCEEDED, or NEEDS_ATTENTION exactly when a crash left a blind downstream's operation UNKNOWN.
"""
from __future__ import annotations

import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeGuard
from uuid import UUID

import httpx
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from kombu import Connection

from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from durable.tokens import create_token
from durable.tools.drill import DRILL_ENV, SETTLED, DrillWorkers, cancel_unsettled
from durable.tools.drill_counts import Expectation, capabilities_of, expectation
from durable.tools.drill_targets import seed_orders
from durable.tools.faults import AFTER_DOWNSTREAM, AFTER_STARTED, FAULT_POINTS
from durable.tools.processes import WebProcess
from durable.tools.sandbox import SandboxServer
from durable.tools.workload import retire, scope_env, tool_account, wait_for_runs

WORKFLOW, VERSION = "claims-agent", 1  # version 1 goes straight through its side effects
DEFAULT_ACTIONS = ("refund", "ticket", "notify")  # the side effects of version 1, each crashed at random
TRANSIENT = ("429", "503")
TRANSIENT_SERVICES = ("orders", "payments", "tickets", "notifications", "llm")


@dataclass(frozen=True)
class ScaleOutConfig:
    runs: int = 2000
    workers: int = 4
    web: int = 2
    fault_rate: float = 0.05  # per operation and fault point: about one operation in five crashes once
    transient_per_second: float = 1.0  # 429/503 answers armed at random on the downstreams
    resend_every: int = 10  # every Nth start request is sent again with the same Idempotency-Key
    seed: int = 1
    broker_url: str = "amqp://guest:guest@127.0.0.1:5672//"
    clients: int = 8  # threads posting start requests
    timeout: float = 1800.0
    log_dir: Path | None = None


def validate(config: ScaleOutConfig) -> None:
    if min(config.runs, config.workers, config.web, config.clients, config.resend_every) < 1:
        raise ValueError("--runs, --workers, --web, --clients and --resend-every must be at least 1")
    if not 0 <= config.fault_rate <= 1:
        raise ValueError("--fault-rate must be between 0 and 1")
    if connection.vendor != "postgresql":
        raise ValueError("the scale-out test needs Postgres (DATABASE_URL): SQLite takes one writer at a time, "
                         "so many processes on one file would measure its lock, not durable")


@dataclass
class ScaleOutResult:
    config: ScaleOutConfig
    run_ids: list[UUID]
    seconds: float
    starts_by_web: dict[str, int]
    resent_starts: int
    resends_answered_same_run: int
    crashes: int
    transient_faults_served: int
    worker_restarts: int
    statuses: Counter[str]
    lost: int
    unexpected: list[str]  # runs that ended elsewhere than their crashes say
    duplicates: int
    wrong_effects: list[str]  # operations with an unexpected number of effects
    unknown: int
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def judge(r: ScaleOutResult) -> list[str]:
    reasons = []
    if r.duplicates:
        reasons.append(f"{r.duplicates} operation(s) took effect twice")
    if r.lost:
        reasons.append(f"{r.lost} run(s) lost (not settled)")
    if r.unexpected:
        reasons.append(f"{len(r.unexpected)} run(s) in an unexpected end state, e.g. {r.unexpected[0]}")
    if r.wrong_effects:
        reasons.append(f"{len(r.wrong_effects)} operation(s) with the wrong number of effects, "
                       f"e.g. {r.wrong_effects[0]}")
    if r.resends_answered_same_run != r.resent_starts:
        reasons.append(f"only {r.resends_answered_same_run} of {r.resent_starts} resent start requests "
                       "returned the run the first one started")
    if len(r.run_ids) != len(set(r.run_ids)) or len(r.run_ids) != r.config.runs:
        reasons.append(f"{len(set(r.run_ids))} distinct run(s) for {r.config.runs} business request(s)")
    return reasons


# -- running ---------------------------------------------------------------


def run_scaleout(config: ScaleOutConfig, *, progress: Callable[[str], None] = lambda _: None) -> ScaleOutResult:
    validate(config)
    queue = f"durable-scaleout-{uuid.uuid4().hex[:8]}"
    fault_dir = Path(tempfile.mkdtemp(prefix="durable-scaleout-faults-"))
    log_dir = config.log_dir or Path(tempfile.mkdtemp(prefix="durable-scaleout-logs-"))
    account = tool_account("scaleout")  # starts the runs; the workers sweep only its runs (durable/scope.py)
    env = {
        **scope_env(account),
        # The drill's short lease and sweep rescue crashed runs within seconds; the grace before a
        # PENDING run counts as lost stays at production's 10 s, since a burst of runs queues longer.
        **DRILL_ENV, "DURABLE_PENDING_GRACE_SECONDS": "10", "DURABLE_DELIVER_TWICE": "true",
        "DURABLE_FAULT_POINTS": ",".join(FAULT_POINTS), "DURABLE_FAULT_ACTIONS": ",".join(DEFAULT_ACTIONS),
        "DURABLE_FAULT_RATE": str(config.fault_rate), "DURABLE_FAULT_SEED": str(config.seed),
        "DURABLE_FAULT_DIR": str(fault_dir),
    }
    token = service_token(account)
    try:
        with SandboxServer() as sandbox, override_settings(
                DURABLE_SANDBOX_URL=sandbox.url, CELERY_TASK_DEFAULT_QUEUE=queue, CELERY_BROKER_URL=config.broker_url):
            # Order ids of this test's own: a run some earlier, interrupted test left in the same
            # database, woken by this test's sweeper, must not refund one of these orders first.
            orders = seed_orders(sandbox, f"ORD-9{uuid.uuid4().int % 10**6:06d}", config.runs)
            progress(f"starting {config.workers} worker(s) and {config.web} web process(es)")
            with DrillWorkers(env, config.workers, log_dir, "scaleout") as workers, WebTier(config, env, log_dir) as web:
                started = time.monotonic()
                starts = post_runs(config, web.urls, token, orders)
                progress(f"{len(starts.run_ids)} run(s) started through the API; waiting for them to settle")
                chaos = TransientFaults(sandbox, random.Random(config.seed), config.transient_per_second)
                def tick() -> None:
                    workers.supervise()
                    chaos.tick()

                try:
                    unsettled = wait_for_runs(starts.run_ids, until=SETTLED, timeout=config.timeout, tick=tick)
                except BaseException:  # interrupted: leave nothing for a later sweeper to wake
                    cancel_unsettled(starts.run_ids)
                    raise
                seconds = time.monotonic() - started
            # Counted once every process is gone: nothing can take effect after this.
            result = measure(config, starts, seconds, crashes=crash_markers(fault_dir),
                             effects=sandbox.state.calls_snapshot(), restarts=workers.restarts,
                             transient=chaos.served(sandbox))
            result.lost = unsettled
            result.violations = judge(result)
            cancel_unsettled(result.run_ids)  # a lost run must not wake later against a sandbox now gone
    finally:
        drop_queue(config.broker_url, queue)
        shutil.rmtree(fault_dir, ignore_errors=True)
        retire(account)  # its token is refused from now on too, and expires within the day
    return result


def service_token(user: User) -> str:
    """The API token of the harness's own service account, which may start and read runs, nothing else.

    It starts claims-agent v1, which is resume-only, so it holds the audited grant for that
    (docs/workflow-versions.md) and names its reason in every start."""
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label="durable", codename__in=("start_run", "view_run", "start_older_version")))
    # Only a token's hash is kept: each harness run makes its own token, which lives a day.
    _, token = create_token(user=user, name="scale-out harness", expires_at=timezone.now() + timedelta(days=1),
                            source="command")
    return token


class WebTier:
    """N gunicorn processes, each on its own port, as N web machines behind a load balancer would be."""

    def __init__(self, config: ScaleOutConfig, env: dict[str, str], log_dir: Path) -> None:
        web_env = {"DURABLE_DELIVER_TWICE": env["DURABLE_DELIVER_TWICE"], "DURABLE_API_USER_RATE": "1000000/min"}
        self.processes = [WebProcess(env=web_env, log_path=log_dir / f"scaleout-web-{i}.log")
                          for i in range(config.web)]

    @property
    def urls(self) -> list[str]:
        return [process.url for process in self.processes]

    def __enter__(self) -> WebTier:
        try:
            for process in self.processes:
                process.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.stop()


@dataclass
class Starts:
    run_ids: list[UUID]
    by_web: Counter[str]
    resent: int
    resent_same_run: int


def post_runs(config: ScaleOutConfig, urls: list[str], token: str, orders: list[str]) -> Starts:
    """POST /api/runs/ for every order, round-robin over the web processes; some twice, as a retrying client."""
    batch = uuid.uuid4().hex[:8]
    clients = [httpx.Client(headers={"Authorization": f"Token {token}"}, timeout=60) for _ in range(config.clients)]

    def start(index: int) -> tuple[UUID, str, bool | None]:
        client, web = clients[index % len(clients)], urls[index % len(urls)]
        order_id = orders[index]
        body = {"workflow": WORKFLOW, "version": VERSION, "reason": "durable_scaleout: v1 runs straight through",
                "business_key": order_id,
                "input": {"order_id": order_id, "customer_message": f"{order_id} arrived broken, please refund it"}}
        headers = {"Idempotency-Key": f"scaleout-{batch}-{order_id}"}
        first = client.post(f"{web}/api/runs/", json=body, headers=headers)
        first.raise_for_status()
        run_id = UUID(first.json()["id"])
        if index % config.resend_every:
            return run_id, web, None
        other = urls[(index + 1) % len(urls)]  # the retry lands on another web process
        again = client.post(f"{other}/api/runs/", json=body, headers=headers)
        return run_id, web, again.status_code == 200 and UUID(again.json()["id"]) == run_id

    try:
        with ThreadPoolExecutor(max_workers=config.clients) as pool:
            answers = list(pool.map(start, range(len(orders))))
    finally:
        for client in clients:
            client.close()
    resends = [same for _, _, same in answers if same is not None]
    return Starts(run_ids=[run_id for run_id, _, _ in answers], by_web=Counter(web for _, web, _ in answers),
                  resent=len(resends), resent_same_run=sum(resends))


class TransientFaults:
    """Arms a 429 or 503 on a random downstream now and then, at about `per_second`."""

    def __init__(self, sandbox: SandboxServer, rng: random.Random, per_second: float) -> None:
        self.sandbox = sandbox
        self.rng = rng
        self.per_second = per_second
        self.armed = 0
        self.last = time.monotonic()

    def tick(self) -> None:
        now = time.monotonic()
        due = self.rng.random() < self.per_second * (now - self.last)
        self.last = now
        if due:
            self.sandbox.state.arm_fault(self.rng.choice(TRANSIENT_SERVICES), self.rng.choice(TRANSIENT))
            self.armed += 1

    def served(self, sandbox: SandboxServer) -> int:
        return self.armed - sum(len(queue) for queue in sandbox.state.faults_snapshot().values())


def crash_markers(fault_dir: Path) -> dict[str, list[str]]:
    """The operations a fault point crashed a worker in, with the points (one marker file each)."""
    crashes: dict[str, list[str]] = {}
    for path in fault_dir.iterdir():
        operation_id, point = path.name.split(".", 1)
        crashes.setdefault(operation_id, []).append(point)
    return crashes


def drop_queue(broker_url: str, queue: str) -> None:
    from durable.project.celery import app

    with Connection(broker_url) as conn:
        bound = app.amqp.queues[queue].bind(conn.default_channel)
        bound.declare()
        bound.purge()
        bound.delete()


# -- counting --------------------------------------------------------------


def gave_up_on_transient_errors(error: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """A run FAILED because a downstream kept answering 429/503 until its retry policy was spent."""
    return bool(error and error.get("retryable") and error.get("exhausted"))


def settling_expectation(points: list[str], downstream: str) -> Expectation:
    """What an operation crashed at these points must end as; a crash that leaves it UNKNOWN is its last."""
    expectations = [expectation(point, capabilities_of(downstream)) for point in points]
    return next((e for e in expectations if e.ends_unknown), expectations[0])


def expected_end(ops: list[tuple[str, str, str, str]], crashes: dict[str, list[str]],
                 error: dict[str, Any] | None) -> tuple[set[str], dict[str, int]]:
    """The end states a run may be in, and each operation's expected effect count, from where it crashed.

    `ops` are (operation_id, action, downstream, ledger status). A crash the downstream can settle
    (keys or a lookup) ends with one effect; on a blind downstream, a crash after STARTED leaves the
    operation UNKNOWN and the run in NEEDS_ATTENTION. A run whose downstream kept answering 429/503
    past its retry policy ends FAILED, its refused operation with no effect, or, when it gave up
    while settling an operation a crash left uncertain, NEEDS_ATTENTION with that operation UNKNOWN.
    """
    effects = {}
    ends_unknown = False
    gave_up_on = given_up_operation(error, crashes)
    for op_id, _, downstream, status in ops:
        expect = settling_expectation(crashes[op_id], downstream) if op_id in crashes else None
        ends_unknown |= bool(expect and expect.ends_unknown)
        refused = status in (Op.FAILED_RETRYABLE, Op.FAILED_FINAL) and not (expect and expect.ends_unknown)
        effects[op_id] = 0 if refused else expect.armed_effects if expect else 1
        if op_id == gave_up_on:  # it was never settled: sent only if the crash came after the answer
            effects[op_id] = int(AFTER_DOWNSTREAM in crashes[op_id])
    if ends_unknown or gave_up_on:
        return {RunStatus.NEEDS_ATTENTION}, effects
    if gave_up_on_transient_errors(error):
        return {RunStatus.FAILED}, effects
    return {RunStatus.SUCCEEDED}, effects


def given_up_operation(error: dict[str, Any] | None, crashes: dict[str, list[str]]) -> str | None:
    """The operation a run gave up on while its outcome was uncertain: crashed after STARTED, then the
    downstream refused every attempt to settle it (a lookup or a re-send with the same key)."""
    if not gave_up_on_transient_errors(error) or error.get("kind") != "unknown_side_effect":
        return None
    op_id: str | None = error.get("operation_id")
    uncertain = op_id is not None and set(crashes.get(op_id, ())) & {AFTER_STARTED, AFTER_DOWNSTREAM}
    return op_id if uncertain else None


def measure(config: ScaleOutConfig, starts: Starts, seconds: float, *, crashes: dict[str, list[str]],
            effects: dict[str, dict[str, Any]], restarts: int, transient: int) -> ScaleOutResult:
    runs = {run_id: (status, error) for run_id, status, error
            in Run.objects.filter(id__in=starts.run_ids).values_list("id", "status", "error")}
    ops: dict[UUID, list[tuple[str, str, str, str]]] = {run_id: [] for run_id in runs}
    unknown = 0
    for op_id, run_id, action, downstream, status in SideEffect.objects.filter(run_id__in=starts.run_ids) \
            .values_list("operation_id", "run_id", "action_name", "downstream", "status"):
        ops[run_id].append((op_id, action, downstream, status))
        unknown += status == Op.UNKNOWN
    unexpected, wrong = [], []
    for run_id, (status, error) in runs.items():
        if status not in SETTLED:
            continue
        allowed, want_effects = expected_end(ops[run_id], crashes, error)
        incomplete = status == RunStatus.SUCCEEDED and len(ops[run_id]) != len(DEFAULT_ACTIONS)
        if status not in allowed or incomplete:
            unexpected.append(f"{run_id} {status}, expected {' or '.join(sorted(allowed))}")
        for op_id, action, downstream, _ in ops[run_id]:
            got = effects.get(downstream, {}).get("effects_by_key", {}).get(op_id, 0)
            if got < 2 and got != want_effects[op_id]:  # two or more are counted as duplicates
                wrong.append(f"{action} {op_id}: {got} effect(s), expected {want_effects[op_id]}")
    return ScaleOutResult(
        config=config, run_ids=starts.run_ids, seconds=seconds, starts_by_web=dict(starts.by_web),
        resent_starts=starts.resent, resends_answered_same_run=starts.resent_same_run, crashes=sum(map(len, crashes.values())),
        transient_faults_served=transient, worker_restarts=restarts,
        statuses=Counter(status for status, _ in runs.values()), lost=0, unexpected=unexpected,
        duplicates=sum(n > 1 for service in effects.values() for n in service["effects_by_key"].values()),
        wrong_effects=wrong, unknown=unknown,
    )


def report(r: ScaleOutResult) -> str:
    c = r.config
    broker = c.broker_url.split("://")[0]
    lines = [
        f"durable_scaleout: {c.runs} runs of {WORKFLOW} v{VERSION}, {c.workers} worker process(es), {c.web} web "
        f"process(es), database {connection.vendor}, broker {broker}, every message delivered twice",
        f"  started through the API   {', '.join(f'{n} via {web}' for web, n in sorted(r.starts_by_web.items()))}",
        f"  start requests resent     {r.resent_starts} ({r.resends_answered_same_run} answered with the same run)",
        f"  worker crashes injected   {r.crashes} (fault rate {c.fault_rate} per operation and point, seed {c.seed})",
        f"  transient 429/503 served  {r.transient_faults_served}",
        f"  worker processes replaced {r.worker_restarts}",
        "  end states                "
        + ", ".join(f"{status} {n}" for status, n in sorted(r.statuses.items())),
        f"  operations UNKNOWN        {r.unknown}",
        f"  duplicates                {r.duplicates}",
        f"  lost                      {r.lost}",
        f"  unexpected end states     {len(r.unexpected)}",
        f"  wrong effect counts       {len(r.wrong_effects)}",
        f"  wall time                 {r.seconds:.1f} s ({c.runs / r.seconds:.1f} runs/s)",
        "verdict: " + ("ok" if r.ok else "VIOLATION: " + "; ".join(r.violations)),
    ]
    return "\n".join(lines)


def forget(result: ScaleOutResult) -> None:
    from durable.tools.workload import delete_runs

    delete_runs(result.run_ids)
