"""Waits: what a parked run waits for (a timer, events from outside, child runs) as the run records it, the
names events may carry, and the key that makes a child run start once per parent visit and key.

A run waits without holding a worker (invariant 17): the database holds this description and the due time,
and the event, the child's end or the database's clock wakes the run. Pure rules: no Django here.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class WaitKind(StrEnum):
    TIMER = "timer"
    EVENT = "event"
    CHILD = "child"
    LIMIT = "limit"  # a named limit on calls (durable/engine/call_limits.py) had no room for the call


EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")  # fullmatch: `$` would let a final newline in


def check_event_name(name: object) -> str:
    """The event name as given, or ValueError saying what a name may be (it is matched exactly)."""
    if not isinstance(name, str) or not EVENT_NAME.fullmatch(name):
        raise ValueError("an event name is 1-100 letters, digits, '_', '.', ':' or '-', starting with a letter "
                         f"or digit; got {name!r}")
    return name


def _iso_time(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}".rstrip()


@dataclass(frozen=True)
class WaitingFor:
    """What a WAITING run waits for, stored on the run (`Run.waiting_for`) while it waits."""

    kind: WaitKind
    step: str
    visit: int
    until: datetime | None = None  # the timer's due time, or the deadline of an event wait (None: no deadline)
    events: tuple[str, ...] = ()  # names, any of which wakes it
    children: tuple[str, ...] = ()  # child run ids, all of which must end
    call_index: int = 0  # the wait's call in its visit: the one that, re-executed, takes up this wait again
    limit: str = ""  # a limit wait's limit name
    limit_key: str = ""  # ...and the key its calls count under ("" for a limit without `per`)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "step": self.step, "visit": self.visit,
                "until": self.until.isoformat() if self.until else None,
                "events": list(self.events), "children": list(self.children), "call_index": self.call_index,
                **({"limit": self.limit, "limit_key": self.limit_key} if self.kind == WaitKind.LIMIT else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WaitingFor:
        until = data.get("until")
        return cls(WaitKind(data["kind"]), data.get("step", ""), int(data.get("visit", 0)),
                   datetime.fromisoformat(until) if until else None, tuple(data.get("events", ())),
                   tuple(data.get("children", ())), int(data.get("call_index", 0)), data.get("limit", ""),
                   data.get("limit_key", ""))

    def woken_by_event(self, name: str) -> bool:
        return self.kind == WaitKind.EVENT and name in self.events

    def describe(self, when: Callable[[datetime], str] = _iso_time, *, deadline: bool = True) -> str:
        """One line for screens and logs: "a timer until ...", "event 'reply' or 'declined' (no deadline)",
        "2 child runs to end". `when` writes the due time (a screen, in the operator's zone); without `deadline`
        it is left out (a screen shows the time left beside it)."""
        until = f" until {when(self.until)}" if self.until and deadline else ""
        if self.kind == WaitKind.TIMER:
            return f"a timer{until}"
        if self.kind == WaitKind.EVENT:
            names = " or ".join(repr(name) for name in self.events)
            return f"event {names}{until or (' (no deadline)' if deadline else '')}"
        if self.kind == WaitKind.LIMIT:
            key = f" for {self.limit_key!r}" if self.limit_key else ""
            return f"limit {self.limit!r}{key} to have room"
        count = len(self.children)
        return f"{count} child run{'s' if count != 1 else ''} to end"


def child_start_key(parent_run_id: str, visit: int, workflow: str, business_key: str) -> str:
    """The idempotency key a child run is started with: one child per parent visit, workflow and key, whatever
    crashes between its start and the parent's record of it (invariant 19). Hashed: the parts may be long."""
    digest = hashlib.sha256(f"{parent_run_id}:{visit}:{workflow}:{business_key}".encode()).hexdigest()[:40]
    return f"child:{digest}"


@dataclass(frozen=True)
class Event:
    """An event from outside, as `ctx.wait_for_event` returns it: consumed once, by this wait."""

    name: str
    payload: Any  # the model the workflow declares for the name (`events={...}`), or the JSON sent
    id: int
    sent_at: str  # ISO 8601, when the mailbox received it
    sender: str = ""

    def as_json(self) -> dict[str, Any]:
        dump = getattr(self.payload, "model_dump", None)  # a declared pydantic model: its JSON, as it was sent
        return {"name": self.name, "payload": dump(mode="json") if callable(dump) else self.payload, "id": self.id,
                "sent_at": self.sent_at, "sender": self.sender}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        return cls(data["name"], data.get("payload"), int(data["id"]), data.get("sent_at", ""),
                   data.get("sender", ""))


@dataclass(frozen=True)
class ChildRun:
    """A child run a step started (`ctx.start_child`): what `ctx.wait_child` waits on."""

    run_id: str
    workflow: str
    business_key: str = ""
