"""Forking from the run page: "Fork from here" on each checkpoint for who may fork, the fork naming its origin and the
origin listing its forks, and each refusal shown on the page with nothing written."""
import pytest

from durable import services
from durable.models import Run
from durable.permissions import CONTENTS_PERMISSIONS
from durable.runtime import executor
from tests.conftest import make_user
from tests.durable import version_workflows as vw
from tests.durable.console.screens import VIEW, action_url, client_for, detail_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def ended():
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="v", allow_older_version=True)
    executor.advance(run.id)
    return Run.objects.get(id=run.id)


def forker():
    return client_for(make_user("fern", VIEW, *CONTENTS_PERMISSIONS, "durable.fork_run"))


def fork(client, run, **form):
    return client.post(action_url(run, "fork"), {"reason": "prompt fixed", "confirm": "on", **form})


def test_each_checkpoint_offers_fork_from_here_to_who_may_fork_only(ended):
    page = forker().get(detail_url(ended)).content.decode()
    assert page.count("Fork from checkpoint") == 4  # seq 0 to 3
    reader = client_for(make_user("rex", VIEW, *CONTENTS_PERMISSIONS)).get(detail_url(ended)).content.decode()
    assert "Fork from here" not in reader


def test_a_fork_names_its_origin_and_the_origin_lists_it(ended):
    client = forker()
    response = fork(client, ended, checkpoint="1", state='{"order_id": "ORD-1", "done": ["a"]}')
    assert response.status_code == 302
    forked = Run.objects.get(forked_from=ended)
    assert forked.forked_at_seq == 1
    origin_page = client.get(detail_url(ended)).content.decode()
    assert "Forks of this run" in origin_page and str(forked.id)[:10] in origin_page
    assert "forked from checkpoint #1 into a new run" in origin_page  # its timeline too
    fork_page = client.get(detail_url(forked)).content.decode()
    assert "A fork of run" in fork_page and "from its checkpoint 1" in fork_page
    assert "fork_run (" in fork_page  # its timeline: who forked it, why, the origin linked


def test_refusals_are_shown_on_the_page_and_write_nothing(ended):
    client = forker()
    assert fork(client, ended, checkpoint="9").status_code == 400  # no such checkpoint: the form's field
    assert fork(client, ended, checkpoint="1", state="[1, 2]").status_code == 400
    refused = fork(client, ended, checkpoint="1", state='{"done": "not a list"}')
    assert refused.status_code == 400 and "state.done" in refused.content.decode()
    conflict = fork(client, ended, checkpoint="2", version="2")
    assert conflict.status_code == 409 and "maps no step" in conflict.content.decode()
    assert Run.objects.count() == 1
