"""A run's spending on model calls and its budget, as the services, the API and the console read them.

The rules are durable/engine/costs.py's; what a worker records is durable/runtime/costs.py's. Here: what an
operator may raise a stopped run's budget to (durable.services.raise_budget), and what a run has spent, in total
and per step visit, read from its row and its journal.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet, Sum

from durable.engine.costs import Budget, Spending, decimal_text, money, read_usage, whole
from durable.engine.states import RunStatus
from durable.errors import InvalidInput
from durable.models import Checkpoint, JournalEntry, Run

BUDGET_EXHAUSTED = "budget_exhausted"  # the run's error kind while its budget stops it (BudgetExhausted.detail)
RAISE_BUDGET = "durable.raise_budget"
# A run waiting on its budget: the condition the raise checks in its conditional UPDATE, and the runs list's filter.
WAITING_ON_BUDGET = Q(status=RunStatus.NEEDS_ATTENTION, error__kind=BUDGET_EXHAUSTED)


def waiting_on_budget(run: Run) -> bool:
    return run.status == RunStatus.NEEDS_ATTENTION and (run.error or {}).get("kind") == BUDGET_EXHAUSTED


def spent(run: Run) -> Spending:
    """What the run's model calls used, from its row."""
    return Spending(run.input_tokens, run.output_tokens, run.cost, run.unpriced_tokens)


def spent_by(runs: QuerySet[Run]) -> Spending:
    """What the model calls of `runs` used together, summed by the database."""
    sums = runs.aggregate(input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"), cost=Sum("cost"),
                          unpriced_tokens=Sum("unpriced_tokens"))
    return Spending(sums["input_tokens"] or 0, sums["output_tokens"] or 0, sums["cost"] or Decimal(0),
                    sums["unpriced_tokens"] or 0)


# How deep a run's delegation is followed when its children's spending is added to its own (a child's children...).
DELEGATION_DEPTH = 10


@dataclass(frozen=True)
class Delegated:
    """What the run and every run it delegated to (ctx.start_child, and their children) used together."""

    spent: Spending
    runs: int  # the run's descendants counted in `spent`


def with_children(run: Run) -> Delegated | None:
    """The run's spending with its child runs' (pydantic-ai issue 6886: a delegated agent's tokens must not be
    lost); None when it has no child run. One query per level of delegation."""
    total, counted, level = spent(run), 0, [run.id]
    for _ in range(DELEGATION_DEPTH):
        children = Run.objects.filter(parent_run_id__in=level)
        level = list(children.values_list("id", flat=True))
        if not level:
            break
        used = spent_by(children)
        total = Spending(total.input_tokens + used.input_tokens, total.output_tokens + used.output_tokens,
                         total.cost + used.cost, total.unpriced_tokens + used.unpriced_tokens)
        counted += len(level)
    return Delegated(total, counted) if counted else None


def budget_of(run: Run) -> Budget | None:
    if run.budget_tokens is None and run.budget_cost is None:
        return None
    return Budget(run.budget_tokens, run.budget_cost)


def raised_budget(run: Run, *, tokens: Any = None, cost: Any = None) -> Budget:
    """The run's budget with the limits given raised, or InvalidInput naming the field: each must be a limit the
    run has, above it and above what the run has used, and together they must leave room for the next model call
    (else the run would stop again at once)."""
    current, used = budget_of(run), spent(run)
    if tokens is None and cost is None:
        raise InvalidInput({"tokens": ["give the new token budget, the new cost budget, or both"]})
    errors: dict[str, list[str]] = {}
    new_tokens = current.tokens if current else None
    new_cost = Decimal(current.cost) if current and current.cost is not None else None
    if tokens is not None:
        new_tokens = _raised_limit("tokens", tokens, new_tokens, used.tokens, errors)
    if cost is not None:
        new_cost = _raised_limit("cost", cost, new_cost, used.cost, errors)
    if errors:
        raise InvalidInput(errors)
    budget = Budget(new_tokens, new_cost)
    still = budget.reached(used)
    if still is not None:
        limit = f"{used.tokens:,} tokens" if still == "tokens" else f"{decimal_text(used.cost)} in cost"
        raise InvalidInput({still: [f"the run has used {limit}, its {still} budget too: raise it as well, or it "
                                    "stops again before its next model call"]})
    return budget


def _raised_limit(field: str, value: Any, limit: Any, used: Any, errors: dict[str, list[str]]) -> Any:
    try:
        new = whole(value, what="the token budget", least=1) if field == "tokens" else money(value, what="the cost budget")
    except ValueError as exc:
        errors[field] = [str(exc)]
        return limit
    what = "token" if field == "tokens" else "cost"

    def shown(amount: Any) -> str:
        return f"{amount:,} tokens" if field == "tokens" else decimal_text(Decimal(amount))

    if limit is None:
        errors[field] = [f"the run has no {what} budget to raise (that is not what stopped it)"]
    elif new <= limit:
        errors[field] = [f"must be above the run's {what} budget, {shown(limit)}"]
    elif new <= used:
        errors[field] = [f"must be above what the run has used, {shown(used)}, or it stops again before its next "
                         "model call"]
    return new


@dataclass(frozen=True)
class VisitSpending:
    """What one step visit's model calls used."""

    step: str
    visit: int | None  # the seq of the checkpoint the visit started from (None: recorded before visits)
    number: int | None  # which visit of its step, from 1
    spent: Spending

    @property
    def name(self) -> str:
        return f"{self.step} #{self.number}" if self.number is not None else self.step

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "visit": self.visit, "visit_number": self.number, "model_calls": self.spent.calls,
                **self.spent.as_json()}


def by_visit(run: Run) -> list[VisitSpending]:
    """Each step visit that made model calls, in the run's order, with what they used (from the journal)."""
    rows = (JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, detail__isnull=False)
            .order_by("id").values_list("step", "visit", "detail"))
    visits: dict[tuple[str, int | None], Spending] = {}
    for step, visit, detail in rows:
        priced = read_usage((detail or {}).get("usage")) if isinstance(detail, dict) else None
        if priced is not None:
            visits.setdefault((step, visit), Spending()).add(priced)
    if not visits:
        return []
    numbers = _visit_numbers(run)
    return [VisitSpending(step, visit, numbers.get(visit) if visit is not None else None, spending)
            for (step, visit), spending in sorted(visits.items(), key=lambda item: (item[0][1] is None, item[0][1] or 0))]


def _visit_numbers(run: Run) -> dict[int, int]:
    """Each visit (the seq it started from) -> which visit of its step it is, from 1."""
    made: dict[str, int] = {}
    numbers = {}
    for seq, step in Checkpoint.objects.filter(run=run).exclude(next_step="").order_by("seq").values_list(
            "seq", "next_step"):
        made[step] = made.get(step, 0) + 1
        numbers[seq] = made[step]
    return numbers
