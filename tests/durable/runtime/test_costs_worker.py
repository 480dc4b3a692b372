"""A run its budget stopped, in a real worker process: it waits, holding nothing, until an operator raises its
budget through the API; the worker then goes on from the visit it stopped in and asks the model only what it
had not asked."""
from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from durable.roles import OPERATOR
from durable.tools.processes import WorkerProcess
from tests.conftest import user_with_roles
from tests.durable.cost_workflows import PRICES
from tests.durable.workflows import calls_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_stops_a_run_at_its_budget_and_goes_on_once_an_operator_raises_it(own_queue, calls_file,
                                                                                       worker_log_dir):
    env = {"DURABLE_LLM_PRICES": json.dumps(PRICES)}
    with WorkerProcess(env=env, log_path=worker_log_dir / "budget.log", name="budget"):
        run, _ = services.start_run(workflow="test-token-budget", business_key="budget-worker",
                                    input={"calls_file": calls_file, "rounds": 5})
        wait_for(lambda: status_of(run.id) == RunStatus.NEEDS_ATTENTION, what="the run to stop at its budget")
        run.refresh_from_db()
        assert (run.lease_owner, run.error["kind"]) == (None, "budget_exhausted")  # nothing holds it
        assert calls_in(calls_file) == ["think-1", "think-2", "think-3"]

        api = APIClient()
        api.force_authenticate(user_with_roles("ops", OPERATOR))
        answer = api.post(f"/api/runs/{run.id}/budget/", {"tokens": 1000, "reason": "worth it"}, format="json")
        assert answer.status_code == 200, answer.json()
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the run to go on and succeed")

    run = Run.objects.get(id=run.id)
    assert calls_in(calls_file) == [f"think-{n}" for n in range(1, 6)]  # each model call made once
    assert (run.input_tokens, run.output_tokens, str(run.cost.normalize())) == (500, 100, "0.000135")
