"""A run's model calls while a worker holds it: its budget checked before each live call, and each call's usage
priced and recorded with its result, in the one write that records it (the rules: durable/engine/costs.py).

Only an activity that declares it is a model call (`usage=`) comes here: a plain activity costs nothing more. The
run's spending is read from the row the claim returned and kept up to date in memory by this worker, the only one
that writes the run while it holds the lease; so the check before a call reads nothing.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from durable import budgets, metrics
from durable.conf import durable_settings
from durable.engine.costs import Budget, BudgetExhausted, PricedUsage, PriceTable, Spending, Usage, UsageOf
from durable.engine.errors import NonRetryableError
from durable.engine.notifications import EventKind
from durable.models import Run
from durable.store import Lease, RunStore

log = logging.getLogger("durable.costs")
# (call index, name, result as recorded, the answer as returned, its usage function: None for a plain activity)
Answered = tuple[int, str, Any, Any, UsageOf | None]
_said_unpriced: set[str] = set()  # models this process has warned of once


class Meter:
    """What the run has spent and may spend, for the worker holding it."""

    def __init__(self, run: Run | None) -> None:
        self._run = run
        self._spent: Spending | None = None  # read from the claimed row when first needed

    @property
    def spent(self) -> Spending:
        if self._spent is None:
            self._spent = Spending() if self._run is None else budgets.spent(self._run)
        return self._spent

    @property
    def budget(self) -> Budget | None:
        return None if self._run is None else budgets.budget_of(self._run)

    def before_model_call(self, call: str) -> None:
        """BudgetExhausted when the run has reached its budget: the call is not made."""
        budget = self.budget
        limit = budget.reached(self.spent) if budget is not None else None
        if budget is not None and limit is not None:
            raise BudgetExhausted(limit=limit, spent=replace(self.spent), budget=budget, call=call)

    @staticmethod
    def priced(name: str, answer: Any, usage_of: UsageOf | None) -> PricedUsage | None:
        """What the call used, priced from DURABLE_LLM_PRICES; None for a plain activity, or when its usage
        function says nothing."""
        if usage_of is None:
            return None
        try:
            usage = usage_of(answer)
        except Exception as exc:
            raise NonRetryableError(f"the usage function of model call {name!r} failed on its answer: "
                                    f"{type(exc).__name__}: {exc}", kind="usage_unreadable") from exc
        if usage is None:
            return None
        if not isinstance(usage, Usage):
            raise NonRetryableError(f"the usage function of model call {name!r} returned {type(usage).__name__}, "
                                    "not a durable.Usage (or None)", kind="usage_unreadable")
        return prices().priced(usage)

    def counted(self, workflow: str, calls: list[PricedUsage]) -> None:
        """After their write: the calls join the run's spending here and in the metrics."""
        for priced in calls:
            self.spent.add(priced)
            metrics.model_called(workflow, priced)
            if priced.cost is None and priced.usage.model not in _said_unpriced:
                _said_unpriced.add(priced.usage.model)
                log.warning("model %s has no price in DURABLE_LLM_PRICES: its tokens are counted, its cost is "
                            "unknown (and not counted against cost budgets)", priced.usage.model)


def prices() -> PriceTable:
    """The price table as set now; an entry the system check (durable.E015) names as wrong prices nothing."""
    try:
        return PriceTable.parse(durable_settings.DURABLE_LLM_PRICES)
    except ValueError as exc:
        log.error("DURABLE_LLM_PRICES is not a price table (%s): every model call's cost is unknown", exc)
        return PriceTable({})


def record(store: RunStore, lease: Lease, step: str, meter: Meter, workflow: str,
           calls: list[Answered]) -> list[PricedUsage]:
    """Record answered calls: each model call with what it used, in one write that adds it to the run's totals,
    and plain activities (and a model call whose usage function says nothing) as plain results, in one write
    before it. Returns what the metered ones used."""
    priced = [(index, name, result, meter.priced(name, answer, usage_of))
              for index, name, result, answer, usage_of in calls]
    plain = [(index, name, result) for index, name, result, used in priced if used is None]
    metered = [(index, name, result, used) for index, name, result, used in priced if used is not None]
    if plain:
        store.record_activities(lease, step, plain)
    if metered:
        store.record_model_calls(lease, step, metered)
        meter.counted(workflow, [used for *_, used in metered])
    return [used for *_, used in metered]


def stop(store: RunStore, lease: Lease, workflow: str, version: int, step: str, exc: BudgetExhausted) -> None:
    """The run reached its budget before a model call: it waits in NEEDS_ATTENTION for an operator to raise the
    budget (the visit then runs again, reusing what it recorded) or to cancel it. Never FAILED, never cut."""
    store.needs_attention(lease, step, exc.detail(), told=EventKind.RUN_OVER_BUDGET)
    metrics.budget_exhausted(workflow, version)
    log.warning("run stopped by its budget before model call %s: %s", exc.call, exc)
