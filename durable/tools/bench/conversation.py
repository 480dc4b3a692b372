"""A long conversation's cost (`durable_bench --conversation N --turn-bytes B`): one step visited N times through a
real worker, each visit appending a turn of B bytes of text to a list in the state, as an agent's conversation
grows. Reports the database's growth beside the conversation's own size, and the last 10 visits' time beside the
first 10's (issue 38: both were quadratic when every checkpoint stored the whole state).

The turns are random letters and spaces (seeded by the turn's number): text the database cannot compress much,
so its growth is what was stored, not what compressed away. Workers started by durable_bench import this module,
which registers the workflow.

With `--large-bytes L`, every visit also asks a tool (a recorded activity) for the same document of L bytes and
appends it to the conversation, as an agent that reads one file again and again does: the run is measured twice,
with large values stored once (DURABLE_LARGE_VALUE_BYTES, 64 KB) and with them inline (0).
"""
from __future__ import annotations

import random
import statistics
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from durable import Context
from durable.engine.graph import Route
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

WORKFLOW = "bench-conversation"
ENDS = 10  # the visits compared at each end of the run
LETTERS = string.ascii_letters + "      "


class Conversation(BaseModel):
    turns: int = 200  # how many visits the run makes
    turn_bytes: int = 4000  # what each visit appends
    large_bytes: int = 0  # a tool's result each visit also appends: the same document every time
    messages: list[str] = []


def turn_text(number: int, size: int) -> str:
    """The `number`th turn's text: `size` random letters and spaces, the same on every run."""
    return "".join(random.Random(number).choices(LETTERS, k=size))


def read_document(size: int) -> str:
    """The tool's result: the same `size` random letters at every call."""
    return turn_text(-1, size)


def turn(ctx: Context, state: Conversation) -> Route:
    per_visit = 2 if state.large_bytes else 1  # a turn, and the tool's result
    state.messages.append(turn_text(len(state.messages) // per_visit, state.turn_bytes))
    if state.large_bytes:
        state.messages.append(ctx.activity("tool.read_document", read_document, state.large_bytes))
    return Route("turn" if len(state.messages) < state.turns * per_visit else None, state)


def conversation_workflow() -> Workflow:
    def build() -> Workflow:
        workflow = Workflow(name=WORKFLOW, version=1, state=Conversation, input=Conversation,
                            tool_catalog_version="none", prompt_release="none", model_policy_version="none")
        workflow.step(turn, name="turn", next=["turn"])
        # The run's output is a count, not (as by default) its final state: what is measured is the checkpoints.
        workflow.output(lambda state: {"turns": len(state.messages) // (2 if state.large_bytes else 1)})
        return workflow

    return registered_once(WORKFLOW, build)


@dataclass
class ConversationCost:
    """What one run of the conversation cost: the database's growth and the time of each visit."""

    system: str
    turns: int
    turn_bytes: int
    grown_bytes: int
    visit_ms: list[float]
    note: str = ""
    large_bytes: int = 0  # the document each turn also carries

    @property
    def conversation_bytes(self) -> int:
        return self.turns * (self.turn_bytes + self.large_bytes)

    @property
    def growth_ratio(self) -> float:
        return self.grown_bytes / self.conversation_bytes

    @property
    def first_ms(self) -> float:
        return statistics.median(self.visit_ms[:ENDS])

    @property
    def last_ms(self) -> float:
        return statistics.median(self.visit_ms[-ENDS:])

    @property
    def time_ratio(self) -> float:
        return self.last_ms / self.first_ms

    def line(self) -> str:
        if self.note:
            return f"  {self.system:<25} {self.note}"
        return (f"  {self.system:<25} database grew {self.grown_bytes / 1e6:7.2f} MB = {self.growth_ratio:5.2f} x the "
                f"conversation; a visit (median): first {ENDS} {self.first_ms:6.2f} ms, last {ENDS} "
                f"{self.last_ms:6.2f} ms = {self.time_ratio:4.2f} x; "
                f"{sum(self.visit_ms) / 1000:.1f} s in all")

    def as_json(self) -> dict[str, Any]:
        return {"system": self.system, "turns": self.turns, "turn_bytes": self.turn_bytes,
                "large_bytes": self.large_bytes,
                "grown_bytes": self.grown_bytes, "visit_ms": self.visit_ms, "note": self.note}


def database_bytes() -> int:
    """The database's size on disk (Postgres: pg_database_size; SQLite: its pages)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database())")
        else:
            cursor.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
        return int(cursor.fetchone()[0])


def visit_intervals_ms(run_id: UUID) -> list[float]:
    """Time between consecutive checkpoints of the run: each visit's whole cost (its step and its write). The first
    visit has none: from the start's checkpoint on, it includes the worker taking the run."""
    from durable.models import Checkpoint

    times = list(Checkpoint.objects.filter(run_id=run_id, seq__gte=1).order_by("seq").values_list("created_at", flat=True))
    return [(later - earlier).total_seconds() * 1000 for earlier, later in zip(times, times[1:], strict=False)]


def measure(turns: int, turn_bytes: int, env: dict[str, str], account: Any, log_dir: Path,
            timeout: float, large_bytes: int = 0, system: str = "durable") -> tuple[ConversationCost, UUID]:
    """One run of `turns` visits through one real worker: what the database grew by, each visit's time."""
    from durable import services
    from durable.engine.states import RunStatus
    from durable.models import Run
    from durable.tools.processes import WorkerProcess

    worker = WorkerProcess(env=env, name="conversation", log_path=log_dir / "conversation-worker.log").start()
    try:
        before = database_bytes()
        run, _ = services.start_run(workflow=WORKFLOW, input={"turns": turns, "turn_bytes": turn_bytes,
                                                              "large_bytes": large_bytes},
                                    business_key=f"bench-conversation-{time.time_ns()}", user=account)
        deadline = time.monotonic() + timeout
        while (status := Run.objects.values_list("status", flat=True).get(id=run.id)) != RunStatus.SUCCEEDED:
            if status in (RunStatus.FAILED, RunStatus.CANCELLED) or time.monotonic() > deadline:
                raise RuntimeError(f"run {run.id} is {status} (worker log: {worker.log_path})")
            time.sleep(0.1)
        grown = database_bytes() - before
    finally:
        worker.stop()
    cost = ConversationCost(system, turns, turn_bytes, grown, visit_intervals_ms(run.id), large_bytes=large_bytes)
    return cost, run.id


conversation_workflow()
