"""What the agents benchmarks report, one line per system (no Django: the peers' runners send it back as JSON)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from durable.tools.bench.compare import DURABLE


@dataclass
class AgentsResult:
    """One system's run of `runs` agents making `calls` model calls of `call_ms` each, on `workers` processes.

    `note` replaces the figures when the system was not measured (not installed, failed)."""

    system: str
    runs: int
    calls: int
    call_ms: float
    workers: int
    seconds: float = 0.0
    connections: int = 0  # peak client connections to the benchmark's database (the benchmark's own left out)
    server_connections: int = 0  # peak client connections to the whole server (every session's)
    max_connections: int = 0
    rss_mb: float = 0.0  # peak resident memory of the worker processes and their children, summed
    made: int = 0  # model calls the fake server answered
    duplicates: int = 0  # calls beyond the first for one (run, step)
    missing: int = 0  # (run, step) calls the server never saw
    detail: str = ""  # how the workers ran (pool, runs in flight each)
    note: str = ""

    @property
    def ideal_seconds(self) -> float:
        return self.calls * self.call_ms / 1000

    def head(self) -> str:
        who = "agents" if self.system == DURABLE else f"agents on {self.system}"
        return (f"{who}: {self.runs} runs x {self.calls} calls of {self.call_ms:g} ms, "
                f"{self.workers} worker{'s' if self.workers != 1 else ''}")

    def line(self) -> str:
        if self.note:
            return f"{self.head()}: {self.note}"
        return (f"{self.head()}: wall {self.seconds:.1f} s (ideal {self.ideal_seconds:.1f} s), peak Postgres "
                f"connections {self.connections}, peak worker RSS {self.rss_mb:.0f} MB; {self.made} calls, "
                f"{self.duplicates} duplicates, {self.missing} missing; server-wide peak {self.server_connections} "
                f"of {self.max_connections} connections{'; ' + self.detail if self.detail else ''}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AgentsResult:
        return cls(**json.loads(text))


@dataclass
class RateResult:
    """Calls under one named limit of `rate`, as the fake server saw them arrive."""

    rate: str
    workers: int
    busiest: int  # the most calls within any 1-second sliding window
    throughput: float  # calls a second over the steady part (the first and last second left out)
    made: int
    duplicates: int
    busiest_sent: int = 0  # the same window over the times the workers sent the calls (their clock, X-Sent-At)

    def line(self) -> str:
        return (f"rate-limit: {self.rate} over {self.workers} worker{'s' if self.workers != 1 else ''}: busiest "
                f"1-second window {self.busiest} calls, throughput {self.throughput:.1f} calls/s; as the workers "
                f"sent them, busiest window {self.busiest_sent}; {self.made} calls, {self.duplicates} duplicates")
