"""A visit as the runtime sees it: the lease and store it writes through, its recorded calls, its step's declarations.

The step context (durable/runtime/context.py) is the author's face of a visit (`durable.Context`); the machinery
its calls share (waits.py, parallel.py, side_effects.py) takes the Visit, never the context's inside.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from durable import metrics, tracing
from durable.conf import durable_settings
from durable.engine.costs import PricedUsage, UsageOf
from durable.engine.errors import refuse_unstorable
from durable.engine.replay import RecordedCall, ReplayCursor
from durable.engine.state_delta import refuse_too_large
from durable.runtime import costs
from durable.store import Lease, RunStore

log = logging.getLogger("durable.activity")


def to_json(value: Any) -> Any:
    """The JSON form a result is recorded in; live and replayed calls both return it."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"activity results must be JSON-serialisable, got {type(value).__name__}")


@dataclass
class Visit:
    """One execution of a step from a checkpoint: whose it is, what it writes through, what it recorded before."""

    run_id: UUID
    business_key: str
    workflow_name: str
    workflow_version: int
    step: str
    attempt: int
    lease: Lease  # every write of the visit is fenced on it
    store: RunStore
    cursor: ReplayCursor  # the calls the visit recorded when it ran before, in the order it made them
    declared_side_effects: tuple[str, ...] = ()  # the step's `side_effects=`: the actions it may perform
    # What the run waited for when it was claimed (Run.waiting_for): the wait a call of this visit takes up again,
    # keeping its due time (durable.runtime.waits).
    woke_from: dict[str, Any] | None = None
    meter: costs.Meter = field(default_factory=lambda: costs.Meter(None))  # model calls' spending, and the budget
    priority: int = 0  # the run's: its place among runs waiting for a limit (durable/runtime/limits.py)
    run_input: dict[str, Any] | None = None  # the run's input: a limit `per` a field of it reads its key there
    family_root: UUID | None = None  # a fork's family's first run (Run.family_root): it names the operation ids
    # The seq of the checkpoint the visit started from (`ctx.visit`): its records are its own, a later visit asks
    # afresh.
    visit: int = field(init=False)

    def __post_init__(self) -> None:
        self.visit = self.lease.seq

    def reserve(self, name: str) -> tuple[int, RecordedCall | None]:
        """The call's index in this visit, and its recorded result if the visit made it before."""
        refuse_unstorable(name, what=f"the name of activity {name!r}", kind="result_not_storable")
        return self.cursor.next_call(name)

    def reused(self, name: str, recorded: RecordedCall) -> Any:
        """A recorded result, returned again; with the visit's last record reused, the journal says which it reused."""
        metrics.result_reused(self.workflow_name, self.workflow_version)
        tracing.reused(self, name, recorded.call_index)
        log.info("activity %s replayed: its recorded result is returned", name, extra={"activity": name})
        if self.cursor.replayed_all:  # the step goes live from here: say once what it took from history
            self.store.record_reuse(self.lease, self.step, [
                {"call_index": call.call_index, "name": call.name} for call in self.cursor.reused_calls])
        return recorded.result

    def record(self, name: str, index: int, answer: Any, usage: UsageOf | None = None) -> Any:
        """Record an activity's answer under its index (a model call's with what it used); the result recorded."""
        result = self.recordable(name, answer)
        if usage is None:
            self.store.record_activity(self.lease, self.step, index, name, result)
        else:
            for used in self.record_together([(index, name, result, answer, usage)]):  # a model call: its span
                tracing.model_call(used.usage.model, used.usage.input_tokens, used.usage.output_tokens)
        return result

    def record_together(self, answered: list[costs.Answered]) -> list[PricedUsage]:
        """Record activities that answered together (ctx.parallel's): model calls with what they used, priced and
        counted; returns what those used."""
        return costs.record(self.store, self.lease, self.step, self.meter, self.workflow_name, answered)

    @staticmethod
    def recordable(name: str, answer: Any) -> Any:
        """The answer as it is recorded (JSON), refused before it is recorded if the database cannot store it."""
        result = to_json(answer)
        refuse_unstorable(result, what=f"the result of activity {name!r}", kind="result_not_storable")
        refuse_too_large(result, what=f"the result of activity {name!r}", kind="result_too_large",
                         limit=durable_settings.DURABLE_MAX_VALUE_BYTES)
        return result
