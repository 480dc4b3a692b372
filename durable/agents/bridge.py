"""Where an SDK's agent runs, and how what it asks for reaches the step's thread: shared by every SDK's wrapper
(durable/agents/pydantic_ai, durable/agents/openai_agents), and importing none of them.

The agent is async: it runs on an event loop of its own, one per worker process, on a thread of its own
(`AgentLoop`). The step context, though, answers only the thread that runs the step (durable numbers a visit's
calls in the order that thread makes them: invariant 16, `WrongThread`). So the agent never calls the step context
itself. Each model request, each tool call and each approval the agent needs becomes an `Ask`, put on a queue the
step's thread serves (`Session.serve`); the agent's task awaits the answer.

Tool calls the model asked for together arrive together: the SDK starts one task per call, and each reaches
the queue within a few turns of the loop (Pydantic AI's in its first; the OpenAI Agents SDK's after its input
guardrails, so its wrapper lets more turns pass: `Session(settle_turns=...)`). Before the step's thread takes what is queued, it lets the agent's loop turn over
(`AgentLoop.settle`), so a group is taken whole and made with `ctx.parallel`, in the order the model asked.

The model requests and the tool bodies themselves still run on the agent's loop (`AgentLoop.call`), where the
model's HTTP client lives: the step's thread (or `ctx.parallel`'s pool) waits for them there.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger("durable.agents")
T = TypeVar("T")
SETTLE_TURNS = 3  # turns of the agent's loop before a group is taken, by default: each task reaches the queue in its first
ABORT_WAIT_SECONDS = 10.0  # how long a step waits for an agent it stopped to unwind


class AgentLoop:
    """An event loop on a daemon thread of its own, where this process's agents run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="durable-agents", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self, coro: Coroutine[Any, Any, T]) -> Running[T]:
        """Start `coro` as a task on the loop, in a copy of the calling thread's context (its log fields)."""
        running: Running[T] = Running(self.loop)
        context = contextvars.copy_context()
        self.loop.call_soon_threadsafe(running.begin, coro, context)
        return running

    def call(self, make: Callable[[], Awaitable[T]], context: contextvars.Context | None = None) -> T:
        """Await `make()` on the loop and return what it gave, blocking the calling thread (never the loop's).

        `context`: the context variables it runs with, those of the agent's task that asked for it (its run, its
        trace), so that a model request or a tool body runs as if the agent had made it itself.
        """
        outcome: Future[T] = Future()

        def begin() -> None:
            task = self.loop.create_task(_awaited(make), context=context)
            task.add_done_callback(lambda done: _pass_on(done, outcome))

        self.loop.call_soon_threadsafe(begin)
        return outcome.result()

    def settle(self, turns: int = SETTLE_TURNS) -> None:
        """Let every task that is ready run until it waits: what they ask for is queued once this returns."""
        self.call(lambda: _turns(turns))


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _pass_on(task: asyncio.Task[T], outcome: Future[T]) -> None:
    if task.cancelled():
        outcome.cancel()
    elif (error := task.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(task.result())


async def _turns(turns: int) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)


_loops: dict[int, AgentLoop] = {}
_loops_lock = threading.Lock()


def agent_loop() -> AgentLoop:
    """This process's agent loop, started on first use (a forked worker child starts its own)."""
    with _loops_lock:
        loop = _loops.get(os.getpid())
        if loop is None:
            loop = _loops[os.getpid()] = AgentLoop()
        return loop


class Running(Future[T]):
    """A task on the agent loop, seen from another thread: its result, and a way to stop it and see it end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._task: asyncio.Task[T] | None = None
        self.ended = threading.Event()

    def begin(self, coro: Coroutine[Any, Any, T], context: contextvars.Context) -> None:
        self._task = self._loop.create_task(coro, context=context)
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[T]) -> None:
        if task.cancelled():
            super().cancel()
        elif task.exception() is not None:
            self.set_exception(task.exception())
        else:
            self.set_result(task.result())
        self.ended.set()

    def stop(self) -> None:
        """Cancel the task and wait (a while) until it has unwound, so nothing of it outlives the step."""
        self._loop.call_soon_threadsafe(lambda: self._task.cancel() if self._task is not None else None)
        if not self.ended.wait(ABORT_WAIT_SECONDS):
            log.warning("an agent run stopped by its step did not unwind within %.0fs", ABORT_WAIT_SECONDS)


@dataclass
class Ask:
    """One thing the agent needs from the step: made on the agent's loop, answered from the step's thread."""

    kind: str  # "model", "tool", "approvals" (Pydantic AI) or "handoff" (OpenAI Agents SDK)
    payload: Any
    answer: asyncio.Future[Any]
    tool_call_id: str | None = None  # a tool call's, to keep a group in the order the model asked
    loop: asyncio.AbstractEventLoop = field(repr=False, default_factory=asyncio.get_running_loop)
    asked_in: contextvars.Context = field(repr=False, default_factory=contextvars.copy_context)

    def context(self) -> contextvars.Context:
        """A copy of the asking task's context variables, for a call made on its behalf."""
        return self.asked_in.copy()

    def give(self, value: Any) -> None:
        self.loop.call_soon_threadsafe(_settle, self.answer, value, None)

    def refuse(self, error: BaseException) -> None:
        """Answer with an error the agent handles itself (a tool's `ModelRetry`, `ToolFailed`)."""
        self.loop.call_soon_threadsafe(_settle, self.answer, None, error)


def _settle(answer: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if answer.done():  # the agent was stopped meanwhile
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(value)


_FINISHED = None  # what the queue holds once the agent's run has ended


class Session:
    """One agent run inside one step: the agent asks on its loop, the step's thread answers."""

    def __init__(self, loop: AgentLoop, *, settle_turns: int = SETTLE_TURNS) -> None:
        self.loop = loop
        self.settle_turns = settle_turns
        self._asks: queue.SimpleQueue[Ask | None] = queue.SimpleQueue()

    async def ask(self, kind: str, payload: Any, *, tool_call_id: str | None = None) -> Any:
        """On the agent's loop: queue what the agent needs and wait for the step's answer."""
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._asks.put(Ask(kind, payload, answer, tool_call_id))
        return await answer

    def serve(self, run: Coroutine[Any, Any, T], handle: Callable[[list[Ask]], None]) -> T:
        """On the step's thread: run the agent, handing each group of its asks to `handle`, until it ends.

        Whatever `handle` raises (a wait for a human, an error durable's retry policy owns) stops the agent and is
        raised here, once the agent has unwound.
        """
        running = self.loop.start(run)
        running.add_done_callback(lambda _: self._asks.put(_FINISHED))
        try:
            while (first := self._asks.get()) is not _FINISHED:
                self.loop.settle(self.settle_turns)
                handle([first, *self._queued()])
        except BaseException:
            running.stop()
            raise
        return running.result()

    def _queued(self) -> list[Ask]:
        """The asks queued now, without waiting for more."""
        asks: list[Ask] = []
        while True:
            try:
                ask = self._asks.get_nowait()
            except queue.Empty:
                return asks
            if ask is _FINISHED:  # cannot come while asks wait for answers; kept for serve() if it does
                self._asks.put(_FINISHED)
                return asks
            asks.append(ask)
