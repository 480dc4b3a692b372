"""What runs cost, on /metrics: llm_tokens_total{workflow,model,kind}, llm_cost_total{workflow,model}, and the runs
stopped by their budget, counted as they stop and waiting now (a model without a price: tests/durable/runtime/
test_costs.py)."""
import pytest

from durable import metrics
from tests.durable.cost_workflows import MODEL, stopped_by_budget
from tests.durable.test_exposition import samples, scrape

pytestmark = pytest.mark.django_db


def test_metrics_list_the_tokens_and_cost_of_model_calls_and_the_runs_over_their_budget(tmp_path, settings):
    settings.DURABLE_METRICS_TOKEN = "scrape-secret"
    before = samples(scrape(HTTP_AUTHORIZATION="Bearer scrape-secret"))
    stopped_by_budget(str(tmp_path / "calls"))  # three calls of 100 input and 20 output tokens, then stopped
    after = samples(scrape(HTTP_AUTHORIZATION="Bearer scrape-secret"))

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    workflow = {"workflow": "test-token-budget"}
    assert moved("llm_tokens_total", **workflow, model=MODEL, kind="input") == 300
    assert moved("llm_tokens_total", **workflow, model=MODEL, kind="output") == 60
    assert moved("llm_cost_total", **workflow, model=MODEL) == pytest.approx(0.000081)
    assert moved("llm_budget_exhausted_total", **workflow, version="1") == 1
    assert after[("runs_waiting_on_budget", ())] == 1


def test_a_budget_stop_series_exists_at_zero_for_every_registered_workflow():
    """So that an alert sees the counter go from 0 to 1 (increase() cannot see a series born at 1)."""
    metrics.declare_known_series()
    assert ("llm_budget_exhausted_total", (("version", "1"), ("workflow", "test-model-calls"))) in {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in metrics.shared_registry().collect() for sample in family.samples}
