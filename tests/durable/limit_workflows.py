"""Workflows whose calls name a limit (docs/workflows.md, "Limits and priority"), registered in the test process and
in worker processes. Each live call appends "start <time> <label>" and "end <time> <label>" to a file, across
processes, so a test counts what the callee saw."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable import RetryableError, RetryPolicy, Usage, Workflow, register
from durable.context import Context

# In the test process only: what a call does while it is in flight (another run advanced meanwhile).
during_call: list[Callable[[], None]] = []


class LimitedInput(BaseModel):
    calls_file: str
    limit: str = "test-limit"
    calls: int = 1
    hold_ms: int = 0  # how long each call stays in flight
    tokens: int = 0  # what each call reports it used
    fail_file: str = ""  # while this file exists, a call removes it and answers 429 with Retry-After
    retry_after: float = 2.0
    together: bool = False  # the calls go out at once (ctx.parallel)
    tenant: str = ""
    hold_file: str = ""  # while this file exists, each call stays in flight


class LimitedState(LimitedInput):
    done: int = 0


def limited_call(calls_file: str, label: str, hold_ms: int, tokens: int, fail_file: str,
                 retry_after: float, hold_file: str = "") -> dict[str, Any]:
    with open(calls_file, "a") as calls:
        calls.write(f"start {time.time():.6f} {label}\n")
    try:
        for hook in list(during_call):
            hook()
        if fail_file and Path(fail_file).exists():
            Path(fail_file).unlink()
            raise RetryableError("429 Too Many Requests", kind="rate_limited", retry_after=retry_after)
        time.sleep(hold_ms / 1000)
        while hold_file and Path(hold_file).exists():
            time.sleep(0.02)
        return {"label": label, "tokens": tokens}
    finally:
        with open(calls_file, "a") as calls:
            calls.write(f"end {time.time():.6f} {label}\n")


def _usage(answer: dict[str, Any]) -> Usage | None:
    return Usage(model="test-model", input_tokens=answer["tokens"], output_tokens=0) if answer["tokens"] else None


limited = register(Workflow(
    name="test-limited", version=1, state=LimitedState, input=LimitedInput,
    retry=RetryPolicy(max_attempts=5, initial_interval=0.05, max_interval=0.2, jitter=0.1),
    prompt_release="p1", tool_catalog_version="t1", model_policy_version="m1",
))


@limited.step()
def call(ctx: Context, state: LimitedState) -> LimitedState:
    args = (state.calls_file, state.hold_ms, state.tokens, state.fail_file, state.retry_after, state.hold_file)
    labels = [f"{ctx.business_key}:{number}" for number in range(state.calls)]
    limit = state.limit or None  # "": the same calls under no limit
    if state.together:
        ctx.parallel(*[ctx.call("llm.chat", limited_call, args[0], label, *args[1:], limit=limit, usage=_usage)
                       for label in labels])
    else:
        for label in labels:
            ctx.activity("llm.chat", limited_call, args[0], label, *args[1:], limit=limit, usage=_usage)
    state.done = state.calls
    return state


def starts_in(calls_file: str | Path) -> list[tuple[float, str]]:
    """(time, label) of each call's start, as the callee saw it, in time order."""
    path = Path(calls_file)
    lines = path.read_text().splitlines() if path.exists() else []
    return sorted((float(at), label) for kind, at, label in (line.split(" ", 2) for line in lines) if kind == "start")


def most_in_flight(calls_file: str | Path) -> int:
    """The most calls the callee had in flight at once."""
    path = Path(calls_file)
    events = sorted((float(at), 0 if kind == "end" else 1) for kind, at, _ in
                    (line.split(" ", 2) for line in path.read_text().splitlines()))
    current = most = 0
    for _, starting in events:  # an end at the same moment as a start is counted first
        current += 1 if starting else -1
        most = max(most, current)
    return most


def busiest_window(calls_file: str | Path, seconds: float = 1.0) -> int:
    """The most call starts the callee saw in any window of `seconds`."""
    times = [at for at, _ in starts_in(calls_file)]
    most = 0
    first = 0
    for last, moment in enumerate(times):
        while moment - times[first] >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most
