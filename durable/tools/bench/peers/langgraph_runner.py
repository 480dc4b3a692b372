"""LangGraph on the workload: a chain of S nodes with PostgresSaver, its tables in a schema of their own."""
from __future__ import annotations

import os
import time
import uuid
from typing import Any, TypedDict
from urllib.parse import quote

from durable.tools.bench.compare import LANGGRAPH, SystemResult, from_intervals
from durable.tools.bench.peers import StepClock, Workload, main, reset_schema

SCHEMA = "durable_bench_langgraph"
# "sync" writes each step's checkpoint before the next step starts, as durable and DBOS do;
# LangGraph's default, "async", writes it while the next step runs (DURABLE_BENCH_LANGGRAPH_DURABILITY).
DURABILITY = os.environ.get("DURABLE_BENCH_LANGGRAPH_DURABILITY", "sync")


class Counter(TypedDict):
    n: int
    key: str  # the thread's business key, for the side effect's idempotency key


def build_graph(steps: int, side_effect: bool, clock: StepClock) -> Any:
    from langgraph.graph import END, START, StateGraph

    from durable.tools.bench.downstream import downstream

    # A node starts once the previous node's checkpoint is written (with "sync"), so the clock
    # ticks on entry: the interval is the previous step plus its checkpoint.
    def bump(state: Counter) -> dict[str, int]:
        clock.tick()
        return {"n": state["n"] + 1}

    def charge(state: Counter) -> dict[str, int]:
        clock.tick()
        # The idempotency key is the thread's key and the node: the same when the thread is resumed.
        downstream.execute(f"{state['key']}:charge", state["key"], {"amount": state["n"]})
        return {"n": state["n"] + 1}

    graph = StateGraph(Counter)
    previous = START
    nodes = [(f"step{i + 1}", bump) for i in range(steps)] + ([("charge", charge)] if side_effect else [])
    for name, fn in nodes:
        graph.add_node(name, fn)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph


def run_langgraph(workload: Workload) -> SystemResult:
    """R threads run one after another in this process, as one durable worker runs its runs."""
    from langgraph.checkpoint.postgres import PostgresSaver

    clock = StepClock()
    graph = build_graph(workload.steps, workload.side_effect, clock)
    reset_schema(workload.database_url, SCHEMA)
    separator = "&" if "?" in workload.database_url else "?"
    url = f"{workload.database_url}{separator}options={quote(f'-c search_path={SCHEMA}')}"
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            app = graph.compile(checkpointer=saver)
            prefix = uuid.uuid4().hex[:8]
            started = time.perf_counter()
            for i in range(workload.runs):
                clock.start_workflow()
                thread = f"bench-{prefix}-{i}"
                app.invoke({"n": 0, "key": thread}, {"configurable": {"thread_id": thread}}, durability=DURABILITY)
            seconds = time.perf_counter() - started
    finally:
        reset_schema(workload.database_url, SCHEMA, create=False)
    return from_intervals(LANGGRAPH, steps=workload.total_steps, seconds=seconds, intervals_ms=clock.intervals_ms)


if __name__ == "__main__":
    main(run_langgraph)
