"""What model calls cost: a call's usage, the price table, a run's spending and its budget (pure rules).

Money is Decimal throughout, never float: a price is per million tokens, a cost is kept to COST_PLACES.
A model the price table does not know still counts its tokens; its cost is unknown (None), never 0.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

MILLION = Decimal(1_000_000)
COST_DIGITS, COST_DECIMALS = 20, 10  # the database's numeric(20, 10): up to 10^10, to a ten-billionth
COST_PLACES = Decimal(1).scaleb(-COST_DECIMALS)
MAX_COST = Decimal(10) ** (COST_DIGITS - COST_DECIMALS)
MODEL_MAX_LENGTH = 200
MAX_TOKENS = 2**63 - 1  # the database's bigint
# A dated snapshot of a model the table prices by its name: gpt-4o-mini-2024-07-18, claude-sonnet-4-5-20250929,
# gpt-4-0613. Only such a suffix: "gpt-4o" must never price "gpt-4o-mini".
SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)$")


def money(value: Any, *, what: str) -> Decimal:
    """A price or an amount as a Decimal: from a string, an int or a Decimal (a float is refused: binary
    fractions are not money), finite, not negative, within the database's numeric(20, 10)."""
    if isinstance(value, bool) or isinstance(value, float) or not isinstance(value, (str, int, Decimal)):
        raise ValueError(f"{what} must be a decimal string such as \"0.15\" (or an int or a Decimal), "
                         f"not {type(value).__name__} {value!r}")
    try:
        amount = Decimal(value.strip() if isinstance(value, str) else value)
    except InvalidOperation:
        raise ValueError(f"{what} must be a decimal number such as \"0.15\", not {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise ValueError(f"{what} must be a finite amount of at least 0, not {value!r}")
    if amount >= MAX_COST or amount != amount.quantize(COST_PLACES):
        raise ValueError(f"{what} must be below {MAX_COST:,} with at most {COST_DECIMALS} decimal places, "
                         f"not {value!r}")
    return amount


def decimal_text(amount: Decimal) -> str:
    """An amount as text, as short as it is exact: 0.000027, not 0.0000270000 nor 2.7E-5."""
    return f"{amount.normalize():f}"


def whole(value: Any, *, what: str, least: int = 0) -> int:
    """A count of tokens: an int of at least `least` (a bool is not one), that a bigint column holds."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= MAX_TOKENS:
        raise ValueError(f"{what} must be a whole number from {least} to {MAX_TOKENS:,}, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class Usage:
    """What one model call used, as its answer reports it. An activity that is a model call says how to read it:
    `ctx.activity("llm.chat", chat, messages, usage=lambda answer: Usage(model=..., input_tokens=...,
    output_tokens=...))`."""

    model: str
    input_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip() or len(self.model) > MODEL_MAX_LENGTH \
                or "\x00" in self.model:
            raise ValueError(f"a model call's model must be a name of 1 to {MODEL_MAX_LENGTH} characters, "
                             f"not {self.model!r}")
        whole(self.input_tokens, what="input_tokens")
        whole(self.output_tokens, what="output_tokens")

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


UsageOf = Callable[[Any], Usage | None]  # a model call's answer -> what it used (None: it does not say)


@dataclass(frozen=True)
class Price:
    """A model's price per million input and output tokens."""

    input: Decimal
    output: Decimal

    def cost(self, usage: Usage) -> Decimal:
        return ((usage.input_tokens * self.input + usage.output_tokens * self.output) / MILLION).quantize(COST_PLACES)


class PriceTable:
    """DURABLE_LLM_PRICES read: {"gpt-4o-mini": {"input": "0.15", "output": "0.60"}, ...} per million tokens."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self._prices = dict(prices)

    @classmethod
    def parse(cls, table: Any) -> PriceTable:
        """The table, or a ValueError naming the entry that is not a price."""
        if not isinstance(table, Mapping):
            raise ValueError(f"must be a dict of model name -> {{\"input\": ..., \"output\": ...}}, not {table!r}")
        prices = {}
        for model, price in table.items():
            if not isinstance(model, str) or not model:
                raise ValueError(f"a model name must be a non-empty string, not {model!r}")
            if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
                raise ValueError(f"{model!r} must give exactly \"input\" and \"output\" (per million tokens), "
                                 f"not {price!r}")
            prices[model] = Price(money(price["input"], what=f"{model!r} input"),
                                  money(price["output"], what=f"{model!r} output"))
        return cls(prices)

    def price_of(self, model: str) -> Price | None:
        """The model's price: its own entry, else its undated name's (gpt-4o-mini-2024-07-18 -> gpt-4o-mini)."""
        found = self._prices.get(model)
        if found is None and (snapshot := SNAPSHOT.search(model)) is not None:
            found = self._prices.get(model[:snapshot.start()])
        return found

    def priced(self, usage: Usage) -> PricedUsage:
        price = self.price_of(usage.model)
        return PricedUsage(usage, price.cost(usage) if price is not None else None)


@dataclass(frozen=True)
class PricedUsage:
    """A model call's usage and its cost; None: its model has no price, so its cost is unknown."""

    usage: Usage
    cost: Decimal | None

    def as_json(self) -> dict[str, Any]:
        """As the call's journal entry records it (detail.usage): the cost as a decimal string."""
        return {"model": self.usage.model, "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost": None if self.cost is None else decimal_text(self.cost)}


@dataclass
class Spending:
    """What model calls used: tokens, the cost of the priced ones, and the tokens of those whose cost is unknown."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    unpriced_tokens: int = 0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_known(self) -> bool:
        return self.unpriced_tokens == 0

    def add(self, priced: PricedUsage) -> None:
        self.input_tokens += priced.usage.input_tokens
        self.output_tokens += priced.usage.output_tokens
        self.calls += 1
        if priced.cost is None:
            self.unpriced_tokens += priced.usage.tokens
        else:
            self.cost += priced.cost

    @classmethod
    def of(cls, calls: Iterable[PricedUsage]) -> Spending:
        spent = cls()
        for priced in calls:
            spent.add(priced)
        return spent

    def as_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "tokens": self.tokens,
                "cost": decimal_text(self.cost), "unpriced_tokens": self.unpriced_tokens}


def read_usage(usage: Any) -> PricedUsage | None:
    """A journal entry's detail.usage read back (None for anything that is not one)."""
    try:
        cost = usage.get("cost")
        return PricedUsage(Usage(usage["model"], usage["input_tokens"], usage["output_tokens"]),
                           None if cost is None else Decimal(cost))
    except (KeyError, TypeError, ValueError, InvalidOperation, AttributeError):
        return None


@dataclass(frozen=True)
class Budget:
    """The most a run may spend on model calls: tokens (input and output together), money (in the price table's
    currency), or both. `Workflow(..., budget=Budget(tokens=200_000, cost="2.50"))`."""

    tokens: int | None = None
    cost: Decimal | str | int | None = None

    def __post_init__(self) -> None:
        if self.tokens is None and self.cost is None:
            raise ValueError("a budget limits tokens, cost or both: give tokens=... or cost=...")
        if self.tokens is not None:
            whole(self.tokens, what="a budget's tokens", least=1)
        if self.cost is not None:
            cost = money(self.cost, what="a budget's cost")
            if cost <= 0:
                raise ValueError(f"a budget's cost must be above 0, not {self.cost!r}")
            object.__setattr__(self, "cost", cost)

    def reached(self, spent: Spending) -> str | None:
        """Which limit the spending has reached ("tokens" or "cost"), None while there is room for another call.
        Only priced calls count against a cost limit: the unknown cost of the others is said, not guessed."""
        if self.tokens is not None and spent.tokens >= self.tokens:
            return "tokens"
        if self.cost is not None and spent.cost >= Decimal(self.cost):
            return "cost"
        return None

    def as_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "cost": None if self.cost is None else decimal_text(Decimal(self.cost))}


class BudgetExhausted(BaseException):
    """Control flow, not an error: the run reached its budget before a model call, and waits in NEEDS_ATTENTION
    for an operator to raise its budget or cancel it. A BaseException, so a step's `except Exception` cannot
    swallow it (the run would then go on spending, silently)."""

    def __init__(self, *, limit: str, spent: Spending, budget: Budget, call: str) -> None:
        used = f"{spent.tokens:,} tokens" if limit == "tokens" else f"{decimal_text(spent.cost)} in cost"
        allowed = f"{budget.tokens:,} tokens" if limit == "tokens" else decimal_text(Decimal(budget.cost or 0))
        super().__init__(f"the run used {used} of its budget of {allowed} before model call {call!r}: it waits "
                         "for an operator to raise its budget, or to cancel it")
        self.limit, self.spent, self.budget, self.call = limit, spent, budget, call

    def detail(self) -> dict[str, Any]:
        """The run's error while it waits (its kind is `budget_exhausted`)."""
        return {"kind": "budget_exhausted", "retryable": False, "message": str(self), "limit": self.limit,
                "call": self.call, "spent": self.spent.as_json(), "budget": self.budget.as_json()}
