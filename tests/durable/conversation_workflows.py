"""A long conversation for the checkpoint tests: one step visited N times, each visit appending a turn, editing or
deleting an earlier one now and then, with values JSON has no type for (datetimes, decimals, sets). It can hold
at a visit while a file exists, so a test can SIGKILL its worker there. Registered in the test process and in
worker processes."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from durable import Workflow, register

STARTED = datetime(2026, 1, 1, tzinfo=UTC)


class Turn(BaseModel):
    text: str
    at: datetime
    cost: Decimal
    tags: set[str] = set()


class ChatInput(BaseModel):
    turns: int = 300
    hold_at: int = -1  # the visit that waits while hold_file exists
    hold_file: str = ""


class Chat(ChatInput):
    messages: list[Turn] = []
    notes: dict[str, Any] = {}
    visits: int = 0


def advance(state: Chat) -> Chat:
    """One visit's change: a turn appended; every 7th visit an earlier turn edited, every 11th one deleted."""
    state.visits += 1
    n = state.visits
    state.messages.append(Turn(text=f"turn {n}", at=STARTED + timedelta(seconds=n), cost=Decimal(n) / 100,
                               tags={f"t{n % 3}", "chat"}))
    if n % 7 == 0:
        state.messages[n // 3 % len(state.messages)].text += " (edited)"
        state.notes[f"edit-{n}"] = {"nested": [n, {"deep": n * 1.5}]}
    if n % 11 == 0:
        del state.messages[n // 5 % len(state.messages)]
        state.notes.pop(f"edit-{n - 4}", None)
    return state


def expected_states(start: ChatInput) -> list[Chat]:
    """The states the step returns at visits 1..turns, computed without durable."""
    state, found = Chat(**start.model_dump()), []
    for _ in range(start.turns):
        state = advance(state)
        found.append(state.model_copy(deep=True))
    return found


conversation = register(Workflow(name="test-conversation", version=1, state=Chat, input=ChatInput))


@conversation.step(next=["turn"])
def turn(ctx: Any, state: Chat) -> Any:
    if state.visits == state.hold_at:
        hold = Path(state.hold_file)
        deadline = time.monotonic() + 60
        while hold.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    state = advance(state)
    return conversation.goto("turn", state) if state.visits < state.turns else conversation.finish(state)


# A conversation whose turns carry one large value: each visit asks a tool for the same 200 KB document (a recorded
# activity result every visit) and keeps it in the turn it appends. Stored once (docs/state-storage.md).
DOCUMENT_BYTES = 200_000


def read_document(name: str) -> dict[str, Any]:
    return {"name": name, "text": ("lorem ipsum " * (DOCUMENT_BYTES // 12 + 1))[:DOCUMENT_BYTES]}


class ReadingInput(BaseModel):
    turns: int = 20
    hold_at: int = -1  # the visit that waits while hold_file exists
    hold_file: str = ""


class Reading(ReadingInput):
    turns_taken: list[dict[str, Any]] = []
    document: dict[str, Any] = {}


def expected_reading(start: ReadingInput) -> Reading:
    """The state the run ends with, computed without durable."""
    document = read_document("report")
    return Reading(**start.model_dump(), document=document,
                   turns_taken=[{"turn": n, "tool": document} for n in range(1, start.turns + 1)])


reading = register(Workflow(name="test-large-value", version=1, state=Reading, input=ReadingInput))


@reading.step(next=["read"])
def read(ctx: Any, state: Reading) -> Any:
    if len(state.turns_taken) == state.hold_at:
        hold = Path(state.hold_file)
        deadline = time.monotonic() + 60
        while hold.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    document = ctx.activity("tool.read_document", read_document, "report")
    state.document = document
    state.turns_taken.append({"turn": len(state.turns_taken) + 1, "tool": document})
    return reading.goto("read", state) if len(state.turns_taken) < state.turns else reading.finish(state)
