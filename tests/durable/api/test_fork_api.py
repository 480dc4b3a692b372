"""POST /api/runs/{id}/fork/: a new run from a checkpoint, the fork naming its origin and the origin its forks, and
each bad input answered (404, 409 naming the difference, 400 naming the field) with nothing written."""
from __future__ import annotations

import pytest

from durable import services
from durable.models import OperatorAction, Run
from durable.runtime import executor
from tests.conftest import client_for, make_user
from tests.durable import version_workflows as vw

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return client_for(make_user("fran", "durable.view_run", "durable.fork_run"))


@pytest.fixture
def ended():
    """A run of test-versioned v1 that ran a -> b -> c: checkpoint 1 is before b, 2 before c, 3 its end."""
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="v", allow_older_version=True)
    executor.advance(run.id)
    return Run.objects.get(id=run.id)


def fork(client, run, **body):
    return client.post(f"/api/runs/{run.id}/fork/", {"reason": "prompt fixed", **body}, content_type="application/json")


def test_a_fork_is_201_with_the_new_run_naming_its_origin_and_the_origin_lists_it(operator, ended):
    response = fork(operator, ended, checkpoint=1, state={"order_id": "ORD-1", "done": ["a", "edited"]})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["forked_from"], body["forked_at_seq"], body["family_root"], body["status"]) == (
        str(ended.id), 1, str(ended.id), "PENDING")
    forks = operator.get(operator.get(f"/api/runs/{ended.id}/").json()["forks"]).json()["results"]
    assert [run["id"] for run in forks] == [body["id"]]
    assert OperatorAction.objects.get(action="fork_run").detail["state_changed"] == {
        "done": [["a"], ["a", "edited"]]}


def test_a_checkpoint_the_run_does_not_have_is_a_404_and_writes_nothing(operator, ended):
    response = fork(operator, ended, checkpoint=42)
    assert response.status_code == 404 and "no checkpoint 42" in response.json()["detail"]
    assert Run.objects.count() == 1


def test_a_version_that_cannot_take_over_from_the_checkpoint_is_a_409_naming_the_difference(operator, ended):
    response = fork(operator, ended, checkpoint=2, version=2)
    assert response.status_code == 409
    assert "maps no step for checkpoint 2's position 'c'" in response.json()["detail"]
    assert Run.objects.count() == 1


def test_a_state_the_model_refuses_is_a_400_naming_the_field(operator, ended):
    response = fork(operator, ended, checkpoint=1, state={"order_id": "ORD-1", "done": "not a list"})
    assert response.status_code == 400 and "state.done" in response.json()
    assert fork(operator, ended, checkpoint=1, reason="").status_code == 400
    assert Run.objects.count() == 1 and not OperatorAction.objects.filter(action="fork_run").exists()


def test_a_caller_without_fork_run_is_refused(ended):
    reader = client_for(make_user("rita", "durable.view_run"))
    assert fork(reader, ended, checkpoint=1).status_code == 403
