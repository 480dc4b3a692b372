"""The agents benchmarks' workflows: five steps, each one model call to the fake model server.

`bench-agents` asks the model through `ctx.activity("model", ...)`; `bench-agents-limited` names the limit
`bench` on each call (`limit="bench"`, issue 37's named limits: `durable_bench --rate-limit`). Each call is an
HTTP GET to `DURABLE_BENCH_MODEL_URL` (the benchmark's fake server, durable/tools/bench/model_server.py), naming
the run and the step, so the server can count each call and report any made twice; each thread calls through a
keep-alive connection of its own (model_server.ask: the stdlib's http.client, or httpx with
DURABLE_BENCH_CLIENT=httpx), with no retries (invariant 6: the activity layer owns retries). Workers started by durable_bench import this
module, which registers both workflows.
"""
from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from durable.context import Context
from durable.tools.bench.model_server import ask
from durable.tools.bench.workflows import registered_once
from durable.workflow import Workflow

WORKFLOW = "bench-agents"
LIMITED = "bench-agents-limited"
LIMIT = "bench"  # the named limit `bench-agents-limited` calls under
CALLS = 5
MODEL_URL = "DURABLE_BENCH_MODEL_URL"
CALL_TIMEOUT_SECONDS = 5.0  # under the lease (10 s by default), as a real model client's timeout must be


class Conversation(BaseModel):
    answers: int = 0


def ask_model(url: str, run: str, step: int) -> dict[str, Any]:
    """One model call: the fake server answers after the benchmark's call-ms."""
    return ask(url, run, step, CALL_TIMEOUT_SECONDS, sent_at=time.time())


def model_step(step: int, limit: str | None) -> Any:
    def call(ctx: Context, state: Conversation) -> Conversation:
        url = os.environ[MODEL_URL]
        ctx.activity("model", ask_model, url, str(ctx.run_id), step, limit=limit)  # None: no limit
        state.answers += 1
        return state

    return call


def agents_workflow(limited: bool = False) -> Workflow:
    """`bench-agents` (or `bench-agents-limited`, each call under the limit `bench`), registered once per process."""
    name = LIMITED if limited else WORKFLOW

    def build() -> Workflow:
        # No tools or prompts: the releases say so (durable.W010).
        workflow = Workflow(name=name, version=1, state=Conversation, input=Conversation, tool_catalog_version="none",
                            prompt_release="none", model_policy_version="none")
        for step in range(1, CALLS + 1):
            workflow.step(model_step(step, LIMIT if limited else None), name=f"call{step}")
        return workflow

    return registered_once(name, build)


def expected_calls(run_ids: list[str]) -> set[tuple[str, int]]:
    """Every (run, step) the fake server must be asked exactly once."""
    return {(run, step) for run in run_ids for step in range(1, CALLS + 1)}


agents_workflow()
agents_workflow(limited=True)
