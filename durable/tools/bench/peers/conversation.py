"""The long conversation (`durable_bench --conversation N --compare`) on the peers, each in a process of its own:
LangGraph with PostgresSaver (one node visited N times, the turns in a messages channel that appends) and DBOS
Transact (a workflow calling one step per turn, which returns the turn). Each reports what the database grew by
and each turn's time, as durable's run does (durable/tools/bench/conversation.py)."""
from __future__ import annotations

import argparse
import json
import operator
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

from durable.tools.bench.compare import DBOS, LANGGRAPH, NOT_INSTALLED
from durable.tools.bench.conversation import ConversationCost, turn_text
from durable.tools.bench.peers import PROJECT_DIR, RUNNERS, StepClock, installed, reset_schema

SCHEMAS = {LANGGRAPH: "durable_bench_langgraph", DBOS: "durable_bench_dbos"}


def database_bytes(database_url: str) -> int:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0


class Chat(TypedDict):
    messages: Annotated[list[str], operator.add]  # a channel that appends what a node returns
    turns: int
    turn_bytes: int


def run_langgraph(turns: int, turn_bytes: int, database_url: str) -> ConversationCost:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph

    clock = StepClock()

    def turn(state: Chat) -> dict[str, list[str]]:
        clock.tick()
        return {"messages": [turn_text(len(state["messages"]), state["turn_bytes"])]}

    graph = StateGraph(Chat)
    graph.add_node("turn", turn)
    graph.add_edge(START, "turn")
    graph.add_conditional_edges("turn", lambda state: "turn" if len(state["messages"]) < state["turns"] else END)
    schema = SCHEMAS[LANGGRAPH]
    reset_schema(database_url, schema)
    separator = "&" if "?" in database_url else "?"
    url = f"{database_url}{separator}options={quote(f'-c search_path={schema}')}"
    try:
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            app: Any = graph.compile(checkpointer=saver)
            before = database_bytes(database_url)
            clock.start_workflow()
            chat: Chat = {"messages": [], "turns": turns, "turn_bytes": turn_bytes}
            config: Any = {"configurable": {"thread_id": f"conversation-{uuid.uuid4().hex[:8]}"},
                           "recursion_limit": turns + 10}  # a RunnableConfig: one node visit per turn
            app.invoke(chat, config, durability="sync")
            clock.tick()  # the last turn's checkpoint is written before invoke returns ("sync")
            grown = database_bytes(database_url) - before
    finally:
        reset_schema(database_url, schema, create=False)
    return ConversationCost(LANGGRAPH, turns, turn_bytes, grown, clock.intervals_ms)


def run_dbos(turns: int, turn_bytes: int, database_url: str) -> ConversationCost:
    from dbos import DBOS as Dbos

    clock = StepClock()

    @Dbos.step()
    def turn(number: int, size: int) -> str:
        return turn_text(number, size)

    @Dbos.workflow()
    def chat(turns: int, size: int) -> int:
        clock.start_workflow()
        messages: list[str] = []
        for number in range(turns):
            messages.append(turn(number, size))
            clock.tick()
        return len(messages)

    schema = SCHEMAS[DBOS]
    reset_schema(database_url, schema, create=False)
    Dbos(config={"name": "durable-bench", "dbos_system_schema": schema, "log_level": "WARNING",
                 "system_database_url": database_url.replace("postgres://", "postgresql://", 1)})
    Dbos.launch()
    try:
        before = database_bytes(database_url)
        chat(turns, turn_bytes)
        grown = database_bytes(database_url) - before
    finally:
        Dbos.destroy()
        reset_schema(database_url, schema, create=False)
    # A turn's interval starts at the one before: the first turn has none (its workflow's start is not a turn).
    return ConversationCost(DBOS, turns, turn_bytes, grown, clock.intervals_ms)


PEERS: dict[str, Callable[[int, int, str], ConversationCost]] = {LANGGRAPH: run_langgraph, DBOS: run_dbos}


def run_conversation_peer(system: str, turns: int, turn_bytes: int, database_url: str,
                          timeout: float) -> ConversationCost:
    """The conversation on `system`, in a fresh process; a row that says why when it cannot be measured."""
    failed = ConversationCost(system, turns, turn_bytes, 0, [], note=NOT_INSTALLED)
    if not installed(RUNNERS[system][1]):
        return failed
    command = [sys.executable, "-m", __name__, "--system", system, "--turns", str(turns), "--turn-bytes",
               str(turn_bytes), "--database-url", database_url]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=PROJECT_DIR)
    except subprocess.TimeoutExpired:
        failed.note = f"failed: no result after {timeout:.0f}s"
        return failed
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        failed.note = f"failed (exit {done.returncode}): {(done.stderr.strip().splitlines() or ['no output'])[-1][:200]}"
        return failed
    return ConversationCost(**json.loads(lines[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system", choices=sorted(PEERS), required=True)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--turn-bytes", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    args = parser.parse_args()
    started = time.perf_counter()
    cost = PEERS[args.system](args.turns, args.turn_bytes, args.database_url)
    print(json.dumps({**cost.as_json(), "note": cost.note or ""}), flush=True)
    print(f"{time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
