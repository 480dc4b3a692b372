"""The standalone project's price table: its own for the demo, or the environment's as JSON."""
import pytest

from durable.conf import SETTINGS, problem
from durable.project import settings as project_settings


def test_the_project_prices_the_demo_s_scripted_model_as_the_model_it_stands_in_for():
    prices = project_settings.DURABLE_LLM_PRICES
    assert prices["scripted-support"] == prices["gpt-4o-mini"] == {"input": "0.15", "output": "0.60"}
    assert problem("DURABLE_LLM_PRICES", prices) is None


def test_the_environment_gives_a_price_table_as_json():
    found = project_settings._from_environment(SETTINGS, {"DURABLE_LLM_PRICES": '{"gpt-4o": {"input": "2.50", '
                                                                                  '"output": "10.00"}}'})
    assert found == {"DURABLE_LLM_PRICES": {"gpt-4o": {"input": "2.50", "output": "10.00"}}}
    with pytest.raises(RuntimeError, match="DURABLE_LLM_PRICES"):
        project_settings._from_environment(SETTINGS, {"DURABLE_LLM_PRICES": "gpt-4o=2.50"})
