"""What runs cost, as an operator reads it: `{{ n|tokens }}` ("12,345"), `{{ spent|cost }}` for a run or a
durable.engine.costs.Spending: the exact amount, and what is unknown said, never shown as 0."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from durable.engine.costs import decimal_text

register = template.Library()


@register.filter
def tokens(value: Any) -> str:
    return f"{int(value or 0):,}"


@register.filter
def cost(spent: Any) -> str:
    """A run's (or a Spending's) cost: its priced calls' amount, and the tokens whose price is unknown."""
    amount, unpriced = Decimal(spent.cost or 0), int(spent.unpriced_tokens or 0)
    if not unpriced:
        return decimal_text(amount)
    unknown = f"unknown for {unpriced:,} tokens of models without a price"
    return unknown if not amount else f"{decimal_text(amount)} + {unknown}"


@register.filter
def money(amount: Any) -> str:
    return "—" if amount is None else decimal_text(Decimal(amount))
