"""LangGraph on the agents workload: asyncio, a node per model call, AsyncPostgresSaver over a connection pool.

Each of W processes runs its share of the threads (thread j in process j mod W) at once on one event loop, at
most `--worker-runs` together: a graph of `--calls` async nodes, each calling the fake model server with
httpx's async client (one per conversation), checkpointed with `durability="sync"` (each node's checkpoint written before the next
starts, as durable and DBOS do) by an AsyncPostgresSaver over a psycopg pool of `--pool-size` connections. Its
tables live in a schema of their own. Each process reports when its last thread finished.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypedDict
from urllib.parse import quote

from durable.tools.bench.model_server import async_client
from durable.tools.bench.peers import reset_schema
from durable.tools.bench.peers.agents import AGENT_RUNNERS, LANGGRAPH_ASYNC, runner_main

SCHEMA = AGENT_RUNNERS[LANGGRAPH_ASYNC].schema
CALL_TIMEOUT_SECONDS = 30.0


class Conversation(TypedDict):
    key: str
    answers: int


def run(args: Any, wait_for_go: Callable[[], float]) -> dict[str, Any]:
    if args.index == 0:
        reset_schema(args.database_url, SCHEMA)
    return asyncio.run(_run(args, wait_for_go))


async def _run(args: Any, wait_for_go: Callable[[], float]) -> dict[str, Any]:
    import importlib

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.graph import END, START, StateGraph
    from psycopg.rows import dict_row

    # psycopg_pool comes with langgraph-checkpoint-postgres (the bench extra); typed loosely, as the peers are
    # where the extra is not installed.
    pools: Any = importlib.import_module("psycopg_pool")

    clients: dict[str, Any] = {}  # a client per conversation (model_server.async_client), closed as it ends

    def node(step: int) -> Any:
        async def call(state: Conversation) -> dict[str, int]:
            client = clients[state["key"]]
            response = await client.get(f"{args.model_url}/model", params={"run": state["key"], "step": step})
            response.raise_for_status()
            return {"answers": state["answers"] + 1}

        return call

    graph = StateGraph(Conversation)
    previous = START
    for step in range(1, args.calls + 1):
        graph.add_node(f"call{step}", node(step))
        graph.add_edge(previous, f"call{step}")
        previous = f"call{step}"
    graph.add_edge(previous, END)

    separator = "&" if "?" in args.database_url else "?"
    url = f"{args.database_url}{separator}options={quote(f'-c search_path={SCHEMA}')}"
    async with pools.AsyncConnectionPool(url, min_size=1, max_size=args.pool_size, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}) as pool:
        saver: Any = AsyncPostgresSaver(conn=pool)
        if args.index == 0:
            await saver.setup()
        app: Any = graph.compile(checkpointer=saver)
        mine = [f"{args.prefix}-{j}" for j in range(args.index, args.runs, args.workers)]
        at_once = asyncio.Semaphore(args.worker_runs)
        finished: list[float] = []
        failures: list[str] = []

        async def converse(key: str) -> None:
            async with at_once, async_client(CALL_TIMEOUT_SECONDS) as client:
                clients[key] = client
                try:
                    await app.ainvoke(Conversation(key=key, answers=0), {"configurable": {"thread_id": key}},
                                      durability="sync")
                    finished.append(time.time())
                except Exception as exc:  # noqa: BLE001 - counted and reported: the benchmark says what failed
                    failures.append(repr(exc)[:200])
                finally:
                    del clients[key]

        await asyncio.get_running_loop().run_in_executor(None, wait_for_go)
        await asyncio.gather(*(converse(key) for key in mine))
    return {"succeeded": len(finished), "failed": len(failures), "finished": max(finished, default=0.0),
            "error": failures[0] if failures else ""}


if __name__ == "__main__":
    runner_main(run)
