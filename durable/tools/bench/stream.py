"""Stream latency (`durable_bench --stream`): from a step's `ctx.stream` to an SSE client's receipt, through a real
worker, a real gunicorn web process and real HTTP clients.

N runs of `bench-stream` each publish CHUNKS chunks, one every EVERY seconds, stamped with the wall clock just
before `ctx.stream` (same machine, same clock). N clients each follow one run at `GET /api/runs/{id}/stream/`
with an API token, connected while the runs are still PENDING (no worker yet), so every chunk is received live; the
worker starts once all are connected. Each client notes its receipt time per chunk; the report is the latency's
median, 99th percentile and maximum, how many chunks were received of those published (none may be missing), and
the load the followers cause: the queries of the web process's stream hub (its own count, logged when its last
follower leaves) and the database's transactions per second while the runs published (pg_stat_database, every
process's). The transport is DURABLE_STREAM_TRANSPORT's, the same for the web process and the worker
(`DURABLE_STREAM_TRANSPORT=poll manage.py durable_bench --stream 100` to measure polling on Postgres).
The web process runs gunicorn's threaded worker with a thread per client and some to spare (docs/operations.md,
"Streams"); the clients are one thread reading every socket as it becomes readable.
"""
from __future__ import annotations

import json
import re
import selectors
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection
from pydantic import BaseModel

from durable import Context, services
from durable.conf import durable_settings
from durable.engine.streams import transport_of
from durable.models import StreamChunk
from durable.tokens import create_token
from durable.tools.bench.workflows import registered_once
from durable.tools.processes import WebProcess, WorkerProcess
from durable.tools.workload import retire, scope_env, tool_account
from durable.workflow import Workflow

WORKFLOW = "bench-stream"
CHUNKS, EVERY = 20, 0.1
SPARE_THREADS = 8  # the web process's threads beyond one per client: the clients' other requests
POOL = 10  # each process's connections, the default pool (the web's hub keeps one; the rest serve the requests)


class Talk(BaseModel):
    chunks: int = CHUNKS
    every: float = EVERY


def talk(ctx: Context, state: Talk) -> Talk:
    for number in range(state.chunks):
        ctx.stream({"n": number, "t": time.time()}, kind="bench")
        time.sleep(state.every)
    return state


def stream_workflow() -> Workflow:
    def build() -> Workflow:
        workflow = Workflow(name=WORKFLOW, version=1, state=Talk, input=Talk)
        workflow.step(talk)
        return workflow

    return registered_once(WORKFLOW, build)


stream_workflow()  # workers started by durable_bench --stream import this module


class ThreadedWebProcess(WebProcess):
    """gunicorn with its threaded worker: a stream holds a thread, not the whole process."""

    def __init__(self, *, threads: int, **options: Any) -> None:
        super().__init__(**options)
        self.threads = threads

    def command(self) -> list[str]:
        return [*super().command(), "--worker-class", "gthread", "--threads", str(self.threads)]


@dataclass
class Follower:
    """One client following one run: the latency of each chunk it received, in seconds."""

    run_id: str
    latencies: list[float] = field(default_factory=list)
    error: str = ""
    buffer: bytes = b""
    event: str = ""
    ended: bool = False

    def read(self, received: bytes, at: float) -> None:
        """Take what arrived at `at`: each complete line, a chunk's latency noted as its data line comes."""
        self.buffer += received
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            text = line.decode()
            if text.startswith("HTTP/1.") and " 200 " not in text:
                self.error, self.ended = text, True
            elif text.startswith("event: "):
                self.event = text[7:]
            elif text.startswith("data: ") and self.event == "bench":
                self.latencies.append(at - json.loads(text[6:])["data"]["t"])
            elif text.startswith("data: ") and self.event == "end":
                self.ended = True


def connect(web: WebProcess, token: str, follower: Follower) -> socket.socket:
    """Open the follower's stream; its answer is read by `follow_all`."""
    sock = socket.create_connection((web.host, web.port), timeout=60)
    sock.sendall((f"GET /api/runs/{follower.run_id}/stream/ HTTP/1.0\r\nHost: {web.host}\r\n"
                  f"Authorization: Token {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    sock.recv(1)  # the status line's first byte: the stream is open, the follower registered
    follower.buffer = b"H"
    sock.setblocking(False)
    return sock


def follow_all(sockets: dict[socket.socket, Follower], timeout: float) -> None:
    """One thread reads every stream as it comes (no client competes with another for the interpreter), stamping
    each receipt, until every stream has ended."""
    with selectors.DefaultSelector() as selector:
        for sock, follower in sockets.items():
            selector.register(sock, selectors.EVENT_READ, data=(sock, follower))
        deadline = time.monotonic() + timeout
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=1.0):
                sock, follower = key.data
                received = sock.recv(65536)
                follower.read(received, time.time())
                if follower.ended or not received:
                    selector.unregister(sock)
                    sock.close()


HUB_LINE = re.compile(rb"stream hub: (\d+) queries in ([\d.]+) s while following")


@dataclass(frozen=True)
class Load:
    """What following cost the database: the web hub's queries over its life, every process's transactions while
    the runs published."""

    hub_queries: int | None
    hub_seconds: float
    transactions: int | None
    seconds: float

    def line(self) -> str:
        hub = (f"web stream hub {self.hub_queries} queries in {self.hub_seconds:.1f} s "
               f"({self.hub_queries / max(self.hub_seconds, 1e-9):.1f}/s)" if self.hub_queries is not None
               else "web stream hub's count not found in its log")
        every = (f"; the database {self.transactions / max(self.seconds, 1e-9):.0f} transactions/s while the runs "
                 f"published ({self.seconds:.1f} s, every process's)" if self.transactions is not None else "")
        return f"  load: {hub}{every}"


@dataclass(frozen=True)
class StreamResult:
    runs: int
    published: int
    received: int
    latencies: list[float]
    errors: list[str]
    transport: str = ""
    load: Load | None = None

    def lines(self) -> list[str]:
        ordered = sorted(self.latencies) or [0.0]

        def at(share: float) -> float:
            return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000

        return [f"durable_bench --stream: {self.runs} clients following {self.runs} runs, {self.published} chunks "
                f"published, {self.received} received ({self.published - self.received} missing), transport "
                f"{self.transport}",
                f"  publish -> SSE receipt: p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {at(0.99):.1f} ms, "
                f"max {ordered[-1] * 1000:.1f} ms",
                *([self.load.line()] if self.load else []),
                *(f"  client error: {error}" for error in self.errors[:5])]


def transactions() -> int | None:
    """The database's committed and rolled back transactions so far (Postgres; None elsewhere)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def hub_count(log: Path, offset: int, timeout: float = 10.0) -> tuple[int | None, float]:
    """The web hub's queries and seconds, from the line it logs when its last follower leaves."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log, "rb") as file:
            file.seek(offset)
            found = HUB_LINE.findall(file.read())
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if not found:
        return None, 0.0
    return sum(int(q) for q, _ in found), max(float(s) for _, s in found)


def measure(runs: int, logs: Path, chunks: int = CHUNKS, every: float = EVERY) -> StreamResult:
    """Start `runs` runs, follow each with a client through a threaded gunicorn, then start the worker."""
    account = tool_account("bench-stream")
    account.user_permissions.add(*_viewer_permissions())
    token = create_token(user=account, name="durable_bench --stream", source="bench")[1]
    transport = transport_of(durable_settings.DURABLE_STREAM_TRANSPORT, connection.vendor)
    env = {**scope_env(account), "DURABLE_WORKER_RUNS": str(runs + 4), "DURABLE_WORKER_SWEEPS": "false",
           "DURABLE_DB_POOL_SIZE": str(POOL), "DURABLE_STREAM_TRANSPORT": transport,
           "DURABLE_WORKFLOW_MODULES": ",".join([*durable_settings.DURABLE_WORKFLOW_MODULES, "durable.tools.bench.stream"])}
    started = [services.start_run(workflow=WORKFLOW, input={"chunks": chunks, "every": every},
                                  business_key=f"stream-{account.pk}-{n}", user=account)[0] for n in range(runs)]
    web_log = logs / "bench-stream-web.log"
    offset = web_log.stat().st_size if web_log.exists() else 0
    web = ThreadedWebProcess(threads=runs + SPARE_THREADS, env=env, log_path=web_log).start()
    worker = WorkerProcess(pool=None, env=env, log_path=logs / "bench-stream-worker.log", name="bench-stream")
    followers = [Follower(str(run.id)) for run in started]
    try:
        sockets = {connect(web, token, f): f for f in followers}
        before, began = transactions(), time.monotonic()
        worker.start()
        follow_all(sockets, timeout=600)
        seconds = time.monotonic() - began
        time.sleep(1.0)  # other backends flush their statistics within a second of their last transaction
        after = transactions()
        hub_queries, hub_seconds = hub_count(web_log, offset)
    finally:
        worker.stop()
        web.stop()
        retire(account)
    published = StreamChunk.objects.filter(run__in=started).count()
    load = Load(hub_queries, hub_seconds, None if before is None or after is None else after - before, seconds)
    return StreamResult(runs, published, sum(len(f.latencies) for f in followers),
                        [s for f in followers for s in f.latencies], [f.error for f in followers if f.error],
                        transport, load)


def _viewer_permissions() -> list[Any]:
    from django.contrib.auth.models import Permission

    names = ["view_run", "view_checkpoint", "view_journalentry", "view_sideeffect"]
    return list(Permission.objects.filter(content_type__app_label="durable", codename__in=names))
