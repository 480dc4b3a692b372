"""A pause as the worker sees it: the run it holds stops at a step boundary once a pause was asked for.

An operator's pause moves a run no worker holds to PAUSED at once (durable/pauses.py); a RUNNING run is only asked
(`Run.pause_requested_at`), and the worker holding it moves it (durable/runtime/transitions.py's `paused_by_worker`,
fenced on its lease) where it sees the request. On Postgres every step's write returns whether a pause was asked
(the run's row as the fenced write found it), so looking costs no query: only waiting for the write in flight to
come back. On SQLite a look is one query. A worker looks:

- when it claims the run (free: the claim read the row);
- at every boundary, for free, at what the writes it already read back found (on Postgres the write before the
  last: a pause asked while steps that make no call run is seen one or two steps later);
- at the boundary after a step that made a call (a model, a tool, a downstream) and at the boundary before a step
  that declares side effects, waiting for the step's own write: the step's checkpoint is written, no step starts
  after it;
- at any other boundary once DURABLE_PAUSE_LOOK_SECONDS passed since the last look;
- else, before the next visit's first outward call leaves (`before_call`, from heartbeat.lease_kept, ctx.activity
  and ctx.parallel: so the agent wrappers' model and tool requests too). A pause asked is then `PauseSeen`: nothing
  is sent, the visit unwinds to the executor's step loop, and the run is PAUSED at the checkpoint the visit started
  from; on resume the visit runs again from it. A visit that calls after a boundary that looked pays no look more.

So once a pause is committed, the step in flight finishes (its calls are made and recorded, its checkpoint
written) and no later step makes a call; steps that make no call at all may go on for one or two more steps on
Postgres, for up to DURABLE_PAUSE_LOOK_SECONDS on SQLite.

What an unwound visit leaves: the look and the unwinding write nothing. What the visit recorded before its first
call stays recorded and is reused when it runs again, as after a crash: a timer that had fired, an event it took,
a child run it started. What it streamed stays on the run's stream (not the journal). A limit's room is taken after
the look, so none is held. No side effect is prepared in a visit whose first call looks: a step that declares side
effects always looks at the boundary before it, and the first visit of a task follows the claim's look.
"""
from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field

from durable.conf import durable_settings
from durable.engine.errors import PauseSeen
from durable.runtime import transitions
from durable.store import Lease, RunStore

log = logging.getLogger("durable.pausing")

_calls_made = 0  # outward calls this process made (heartbeat.lease_kept counts them): "did the step call anything?"


def call_made() -> None:
    """An outward call is about to leave (under a kept lease): the worker looks at the next boundary."""
    global _calls_made
    _calls_made += 1  # shared by every run of the process: a count another run bumped only makes a look early


@dataclass
class Looks:
    """When the worker holding one run (under `lease`) last looked whether a pause was asked for, and whether the
    visit running now still owes a look before its first call."""

    store: RunStore
    lease: Lease
    at: float = field(default_factory=time.monotonic)
    calls_seen: int = field(default_factory=lambda: _calls_made)
    owed: bool = False  # the last boundary did not look: the visit's first outward call does

    def at_boundary(self, *, before_side_effects: bool) -> bool:
        """At a step boundary (the checkpoint written): whether a pause was asked, looking only when it is due (before
        side effects, after a call, or by the clock); when it is not, the next visit's first outward call looks. A
        pause a write of this worker's already found (on Postgres each step's write returns it) is seen at once."""
        if self.lease.pause_asked:
            return True
        self.owed = not (before_side_effects or _calls_made != self.calls_seen
                         or time.monotonic() - self.at >= durable_settings.DURABLE_PAUSE_LOOK_SECONDS)
        return not self.owed and self.asked()

    def asked(self) -> bool:
        """Look: whether a pause was asked for the run."""
        self.at, self.calls_seen, self.owed = time.monotonic(), _calls_made, False
        return self.store.pause_asked(self.lease)


_held: ContextVar[Looks | None] = ContextVar("durable_pause_looks", default=None)


def watched(store: RunStore, lease: Lease) -> Looks:
    """The looks of the run the step loop on this thread holds under `lease` (its claim looked)."""
    looks = Looks(store, lease)
    _held.set(looks)  # left set after the loop: `before_call` answers only the lease it was made for
    return looks


def before_call(lease: Lease) -> None:
    """An outward call is about to leave under `lease`: PauseSeen, with nothing sent, when the visit owed a look and
    a pause was asked. One query, once per visit, only after a boundary that did not look."""
    looks = _held.get()
    if looks is not None and looks.owed and looks.lease is lease and looks.asked():
        log.info("a pause was asked: the visit's first call is not sent, the run pauses at its checkpoint")
        raise PauseSeen(f"run {lease.run_id} was asked to pause")


def pause_now(lease: Lease) -> bool:
    """The worker stops holding the run: PAUSED. False when its lease was lost meanwhile (nothing is written)."""
    paused = transitions.paused_by_worker(lease.run_id, token=lease.token)
    if paused:
        log.info("run paused at a step boundary, as asked")
    return paused
