"""A fake model provider for the agents benchmarks: answers each request after `call_ms`, counting what it was asked.

An asyncio HTTP/1.1 server (keep-alive, stdlib only) on a thread of the benchmark's process: one task per open
connection and a sleep per request, so thousands of calls wait at once for the price of a coroutine each, and the
server is never what limits the runs it serves. `GET /model?run=<id>&step=<n>` answers
`{"run": ..., "step": ..., "text": ...}` once `call_ms` has passed since the request arrived. It keeps, per
(run, step), how many times it was asked (a model call made twice is a duplicate the benchmark reports), each
request's arrival time (the rate-limit benchmark's windows) and the most requests it held at once.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

MAX_HEAD_BYTES = 16384


@dataclass(frozen=True)
class Calls:
    """What the server was asked: per (run, step) how many times, and when each request arrived (monotonic)."""

    per_call: Counter[tuple[str, int]]
    arrivals: list[float]
    peak_in_flight: int
    sent: list[float] = field(default_factory=list)  # the callers' own clock as each call went out (X-Sent-At)
    first_arrival: dict[tuple[str, int], float] = field(default_factory=dict)  # per (run, step), monotonic

    @property
    def total(self) -> int:
        return sum(self.per_call.values())

    @property
    def duplicates(self) -> int:
        """Requests beyond the first for the same (run, step): a model asked twice for one call."""
        return sum(count - 1 for count in self.per_call.values() if count > 1)

    def missing(self, expected: set[tuple[str, int]]) -> int:
        """How many of the expected (run, step) calls never reached the server."""
        return len(expected - self.per_call.keys())


class ModelServer:
    """Start it (`with ModelServer(call_ms) as server:`), point the runs at `server.url`, read `server.calls()`."""

    def __init__(self, call_ms: float, host: str = "127.0.0.1") -> None:
        self.call_seconds = call_ms / 1000
        self.host = host
        self.port = 0
        self._per_call: Counter[tuple[str, int]] = Counter()
        self._first_arrival: dict[tuple[str, int], float] = {}
        self._arrivals: list[float] = []
        self._sent: list[float] = []
        self._in_flight = 0
        self._peak = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="durable-bench-model", daemon=True)
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ModelServer:
        self._thread.start()
        self._ready.wait(10)
        if self._failure is not None or not self.port:
            raise RuntimeError(f"the fake model server did not start: {self._failure!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)

    def calls(self) -> Calls:
        """What it was asked so far (read from the server's own thread, so the counts are consistent)."""
        if self._loop is None:
            return Calls(Counter(), [], 0)
        future = asyncio.run_coroutine_threadsafe(self._snapshot(), self._loop)
        return future.result(10)

    def cpu_seconds(self) -> float:
        """CPU time the server's thread has used so far (what the harness costs the machine beside the workers)."""
        from durable.tools.bench.cpu import process_cpu_seconds

        tid = self._thread.native_id
        return (process_cpu_seconds(f"self/task/{tid}") or 0.0) if tid else 0.0

    def reset(self) -> None:
        """Forget what it was asked (between repeats)."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._forget(), self._loop).result(10)

    async def _snapshot(self) -> Calls:
        return Calls(Counter(self._per_call), list(self._arrivals), self._peak, list(self._sent),
                     dict(self._first_arrival))

    async def _forget(self) -> None:
        self._per_call.clear()
        self._first_arrival.clear()
        self._arrivals.clear()
        self._sent.clear()
        self._peak = self._in_flight

    def _serve(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: B036 - reported to the thread that waits for the server
            self._failure = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._connection, self.host, 0, backlog=4096, limit=MAX_HEAD_BYTES)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stopped.wait()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._requests(reader, writer)
        except asyncio.CancelledError:  # the server stopping with the connection open: not an error of the calls
            pass
        finally:
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                _method, target, _version = (lines[0].split(" ") + ["", ""])[:3]
                length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                               if line.lower().startswith("content-length:")), 0)
                if length:
                    await reader.readexactly(length)
                sent = next((line.split(":", 1)[1].strip() for line in lines[1:]
                             if line.lower().startswith("x-sent-at:")), "")
                status, body = await self._answer(target, arrived, sent)
                payload = json.dumps(body).encode()
                writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(payload)}\r\nConnection: keep-alive\r\n\r\n".encode() + payload)
                await writer.drain()
        except ConnectionError:
            return

    async def _answer(self, target: str, arrived: float, sent: str = "") -> tuple[str, dict[str, object]]:
        query = parse_qs(urlsplit(target).query)
        try:
            run, step = query["run"][0], int(query["step"][0])
        except (KeyError, ValueError):
            return "400 Bad Request", {"error": "GET /model?run=<id>&step=<n>"}
        self._per_call[(run, step)] += 1
        self._first_arrival.setdefault((run, step), arrived)
        self._arrivals.append(arrived)
        if sent:
            try:
                self._sent.append(float(sent))
            except ValueError:
                pass
        self._in_flight += 1
        self._peak = max(self._peak, self._in_flight)
        try:
            await asyncio.sleep(max(0.0, arrived + self.call_seconds - time.monotonic()))
        finally:
            self._in_flight -= 1
        return "200 OK", {"run": run, "step": step, "text": f"answer {step} for {run}"}


_tls: Any = None  # one SSL context for every client of the process: building one (the CA bundle) costs milliseconds
_tls_lock = threading.Lock()
_local = threading.local()


def _shared_tls() -> Any:
    global _tls
    with _tls_lock:
        if _tls is None:
            import ssl

            _tls = ssl.create_default_context()
        return _tls


def thread_client(timeout: float) -> Any:
    """This thread's httpx client for the fake model: one keep-alive connection per thread, its retries off.

    One client shared by a thousand threads was the bottleneck (httpx's pool, measured: 1,000 calls of 1 s at once
    took 13 s, and some failed with EBADF); a client per thread, built on a shared SSL context, costs next to nothing
    and leaves the server's answer time as what is measured."""
    client = getattr(_local, "client", None)
    if client is None:
        import httpx

        client = _local.client = httpx.Client(timeout=timeout, verify=_shared_tls(),
                                              transport=httpx.HTTPTransport(retries=0, verify=_shared_tls()))
    return client


CLIENT = "DURABLE_BENCH_CLIENT"  # how the workflows call the fake server: "http.client" (the default) or "httpx"


def ask(url: str, run: str, step: int, timeout: float, *, sent_at: float | None = None) -> dict[str, Any]:
    """One call to the fake model: GET /model?run=..&step=.., its JSON answer; raises on an error status.

    Through this thread's keep-alive connection of the stdlib's http.client by default: 0.2 ms of CPU a call
    where an httpx client of the thread's own took 0.8 ms and one httpx client shared by the threads 5 ms
    (its connection pool, measured with 200 threads: docs/benchmarks-log.md). The benchmark measures the
    engine, not a client library; `DURABLE_BENCH_CLIENT=httpx` measures with httpx (a client per thread).
    No retries either way (invariant 6: the activity layer owns them)."""
    headers = {} if sent_at is None else {"X-Sent-At": repr(sent_at)}
    if os.environ.get(CLIENT, "http.client") == "httpx":
        response = thread_client(timeout).get(f"{url}/model", params={"run": run, "step": step}, headers=headers)
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer
    return _ask_stdlib(url, f"/model?{urlencode({'run': run, 'step': step})}", headers, timeout)


def _ask_stdlib(url: str, target: str, headers: dict[str, str], timeout: float) -> dict[str, Any]:
    import http.client

    connections: dict[str, http.client.HTTPConnection] = _local.__dict__.setdefault("connections", {})
    conn = connections.get(url)
    if conn is None:
        parts = urlsplit(url)
        conn = connections[url] = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                                             timeout=timeout)
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        body = response.read()
    except BaseException:
        conn.close()  # a connection left mid-exchange is not reused: the next call opens a new one
        del connections[url]
        raise
    if response.status >= 400:
        raise RuntimeError(f"the fake model answered {response.status}: {body[:200]!r}")
    answer: dict[str, Any] = json.loads(body)
    return answer


def async_client(timeout: float) -> Any:
    """An httpx async client for one conversation (the same reason: one shared by a thousand tasks took 26 s for
    1,000 calls of 1 s), on the process's shared SSL context; the caller closes it."""
    import httpx

    return httpx.AsyncClient(timeout=timeout, verify=_shared_tls())


def busiest_window(arrivals: list[float], seconds: float = 1.0) -> int:
    """The most arrivals within any `seconds`-long sliding window (half-open: [t, t + seconds))."""
    ordered = sorted(arrivals)
    best, first = 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= seconds:
            first += 1
        best = max(best, last - first + 1)
    return best


def steady_throughput(arrivals: list[float], edge: float = 1.0) -> float:
    """Calls a second over the steady part: arrivals between the first's + `edge` and the last's - `edge`
    (the ramp-up and the tail left out), over that span; over the whole span when it is too short for that."""
    ordered = sorted(arrivals)
    if len(ordered) < 2:
        return 0.0
    start, end = ordered[0] + edge, ordered[-1] - edge
    if end - start < edge:
        start, end = ordered[0], ordered[-1]
        return (len(ordered) - 1) / (end - start) if end > start else 0.0
    inside = sum(1 for at in ordered if start <= at < end)
    return inside / (end - start)
