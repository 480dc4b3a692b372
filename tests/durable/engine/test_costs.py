"""The rules of what model calls cost (durable/engine/costs.py): a usage, the price table, a run's spending and its
budget. Money is Decimal; a model without a price has an unknown cost, never 0."""
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable import Budget, Usage
from durable.engine.costs import (
    MAX_TOKENS,
    BudgetExhausted,
    PricedUsage,
    PriceTable,
    Spending,
    decimal_text,
    read_usage,
)

TABLE = PriceTable.parse({"gpt-4o-mini": {"input": "0.15", "output": "0.60"},
                          "gpt-4o": {"input": "2.50", "output": "10"}})


def test_a_call_is_priced_per_million_input_and_output_tokens():
    priced = TABLE.priced(Usage(model="gpt-4o-mini", input_tokens=1_000, output_tokens=500))
    assert priced.cost == Decimal("0.00045")  # (1,000 x 0.15 + 500 x 0.60) / 1,000,000
    assert priced.as_json() == {"model": "gpt-4o-mini", "input_tokens": 1000, "output_tokens": 500,
                                "cost": "0.00045"}


@pytest.mark.parametrize(("model", "priced_as"), [
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"), ("gpt-4o-2024-08-06", "gpt-4o"), ("gpt-4o-0613", "gpt-4o"),
    ("gpt-4o-20250929", "gpt-4o"), ("gpt-4o-latest", "gpt-4o"),
])
def test_a_dated_snapshot_takes_its_model_s_price(model, priced_as):
    assert TABLE.price_of(model) == TABLE.price_of(priced_as) is not None


@pytest.mark.parametrize("model", ["gpt-4o-mini-high", "gpt-4o-audio", "gpt-4", "GPT-4O-MINI", "claude-3"])
def test_a_model_the_table_does_not_list_has_no_price_not_its_neighbour_s(model):
    """gpt-4o must never price gpt-4o-audio: only a dated snapshot takes its model's price."""
    priced = TABLE.priced(Usage(model=model, input_tokens=10, output_tokens=10))
    assert priced.cost is None and priced.as_json()["cost"] is None


@pytest.mark.parametrize(("table", "says"), [
    ({"m": {"input": 0.15, "output": "1"}}, "not float"),
    ({"m": {"input": "NaN", "output": "1"}}, "finite"),
    ({"m": {"input": "1", "output": "0.00000000001"}}, "at most 10 decimal places"),
    ({"m": {"input": "1", "output": "1", "cached": "0.1"}}, "exactly"),
    ({"": {"input": "1", "output": "1"}}, "non-empty"),
    ("gpt-4o=1", "must be a dict"),
])
def test_a_price_table_that_is_not_one_is_refused_naming_the_entry(table, says):
    with pytest.raises(ValueError, match=says):
        PriceTable.parse(table)


@pytest.mark.parametrize(("given_", "says"), [
    ({"model": "", "input_tokens": 1, "output_tokens": 1}, "model"),
    ({"model": "m" * 201, "input_tokens": 1, "output_tokens": 1}, "model"),
    ({"model": "m", "input_tokens": -1, "output_tokens": 1}, "input_tokens"),
    ({"model": "m", "input_tokens": 1, "output_tokens": 1.5}, "output_tokens"),
    ({"model": "m", "input_tokens": True, "output_tokens": 1}, "input_tokens"),
    ({"model": "m", "input_tokens": MAX_TOKENS + 1, "output_tokens": 1}, "input_tokens"),
])
def test_a_usage_that_is_not_one_is_refused(given_, says):
    with pytest.raises(ValueError, match=says):
        Usage(**given_)


def test_spending_adds_the_priced_cost_and_keeps_the_unpriced_tokens_apart():
    spent = Spending.of([TABLE.priced(Usage("gpt-4o-mini", 1_000, 500)), TABLE.priced(Usage("mystery", 70, 30))])
    assert (spent.tokens, spent.cost, spent.unpriced_tokens, spent.calls, spent.cost_known) == (
        1_600, Decimal("0.00045"), 100, 2, False)
    assert spent.as_json() == {"input_tokens": 1070, "output_tokens": 530, "tokens": 1600, "cost": "0.00045",
                               "unpriced_tokens": 100}


def test_a_recorded_usage_reads_back_and_anything_else_does_not():
    priced = TABLE.priced(Usage("gpt-4o", 3, 4))
    assert read_usage(priced.as_json()) == priced
    assert read_usage({"model": "m", "input_tokens": 1, "output_tokens": 1, "cost": None}) == PricedUsage(
        Usage("m", 1, 1), None)
    for junk in (None, "usage", {}, {"model": "m"}, {"model": "m", "input_tokens": -1, "output_tokens": 0},
                 {"model": "m", "input_tokens": 1, "output_tokens": 1, "cost": "lots"}):
        assert read_usage(junk) is None


def test_a_budget_is_reached_when_its_tokens_or_its_priced_cost_are_used_up():
    budget = Budget(tokens=1_000, cost="0.01")
    assert budget.cost == Decimal("0.01")
    assert budget.reached(Spending(input_tokens=900, output_tokens=99)) is None
    assert budget.reached(Spending(input_tokens=900, output_tokens=100)) == "tokens"
    assert budget.reached(Spending(input_tokens=1, cost=Decimal("0.01"))) == "cost"
    # The tokens of a model without a price count against the token limit, not the cost limit.
    assert Budget(cost="0.01").reached(Spending(input_tokens=10**9, unpriced_tokens=10**9)) is None


@pytest.mark.parametrize(("given_", "says"), [
    ({}, "tokens, cost or both"), ({"tokens": 0}, "whole number from 1"), ({"cost": "0"}, "above 0"),
    ({"cost": 2.5}, "not float"), ({"tokens": "100"}, "whole number"),
])
def test_a_budget_that_is_not_one_is_refused(given_, says):
    with pytest.raises(ValueError, match=says):
        Budget(**given_)


def test_the_stop_says_what_was_used_of_which_limit_before_which_call():
    stop = BudgetExhausted(limit="cost", spent=Spending(input_tokens=5, cost=Decimal("2.5000000000")),
                           budget=Budget(cost="2.5"), call="llm.chat")
    assert str(stop).startswith("the run used 2.5 in cost of its budget of 2.5 before model call 'llm.chat'")
    assert stop.detail()["kind"] == "budget_exhausted" and stop.detail()["budget"] == {"tokens": None, "cost": "2.5"}
    assert not isinstance(stop, Exception)  # a step's `except Exception` cannot swallow it


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_a_cost_is_exact_to_the_ten_billionth_whatever_the_tokens(input_tokens, output_tokens):
    cost = TABLE.priced(Usage("gpt-4o", input_tokens, output_tokens)).cost
    assert cost == (Decimal(input_tokens) * Decimal("2.5") + Decimal(output_tokens) * 10) / 1_000_000
    assert Decimal(decimal_text(cost)) == cost
