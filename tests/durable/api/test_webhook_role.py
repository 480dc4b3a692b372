"""The webhook role (durable/roles.py): a webhook's service account, with an API token, sends events to runs and
reads the status of the runs it sent events to; it lists no runs, starts, cancels, retries and resumes nothing, and
never reads a run's contents or an event's payload. (tests/test_roles_matrix.py walks every endpoint as this role
too.)"""
import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from durable.roles import ROLES, WEBHOOK
from tests.conftest import api_token, user_with_roles
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk() -> APIClient:
    """The support desk's webhook, as its deployment would set it up: a service account holding the webhook role."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user_with_roles('support-desk', WEBHOOK))}")
    return client


@pytest.fixture
def waiting_run(tmp_path) -> Run:
    run, _ = services.start_run(workflow="test-wait-event", business_key="ORDER-8",
                                input={"calls_file": str(tmp_path / "calls"), "seconds": 0})
    run = advance(run)
    assert run.status == RunStatus.WAITING
    return run


def test_the_webhook_role_holds_sending_events_and_nothing_else():
    assert set(ROLES[WEBHOOK]) == {"durable.send_event"}


def test_a_webhook_reads_no_run_it_sent_no_event_to_and_lists_none_of_them(desk, waiting_run):
    assert desk.get(f"/api/runs/{waiting_run.id}/").status_code == 404  # as a run that does not exist
    assert desk.get(f"/api/runs/{waiting_run.id}/events/").status_code == 404
    assert desk.get("/api/runs/").json()["results"] == []  # its own runs only: none yet


def test_a_webhook_that_may_start_runs_reads_the_runs_it_started(tmp_path):
    """As the demo's intake: the webhook role and durable.start_run."""
    intake = user_with_roles("intake-service", WEBHOOK)
    intake.user_permissions.add(Permission.objects.get(codename="start_run"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(intake)}")
    started = client.post("/api/runs/", {"workflow": "test-wait-event", "business_key": "ORDER-9",
                                         "input": {"calls_file": str(tmp_path / "calls"), "seconds": 0}}, format="json")
    assert started.status_code == 201
    assert client.get(f"/api/runs/{started.json()['id']}/").status_code == 200
    assert [run["id"] for run in client.get("/api/runs/").json()["results"]] == [started.json()["id"]]

def test_a_webhook_sends_a_reply_by_business_key_and_reads_the_run_it_woke(desk, waiting_run):
    sent = desk.post("/api/events/", {"workflow": "test-wait-event", "business_key": "ORDER-8", "name": "reply",
                                      "payload": {"text": "yes"}, "idempotency_key": "desk-1"}, format="json")
    assert sent.status_code == 201 and sent.json()["woke_run"] is True
    run = desk.get(f"/api/runs/{waiting_run.id}/")
    assert run.status_code == 200 and run.json()["status"] == RunStatus.PENDING
    assert "checkpoints" not in run.json() and "journal" not in run.json()  # status and metadata, not contents
    mailbox = desk.get(f"/api/runs/{waiting_run.id}/events/")
    assert mailbox.status_code == 200 and "payload" not in mailbox.json()["results"][0]


def test_a_webhook_cannot_start_cancel_retry_or_resume_a_run(desk, waiting_run):
    refused = [desk.post("/api/runs/", {"workflow": "test-wait-event", "business_key": "X", "input": {}},
                         format="json").status_code]
    refused += [desk.post(f"/api/runs/{waiting_run.id}/{action}/", {"reason": "r"}, format="json").status_code
                for action in ("cancel", "retry", "resume", "migrate", "budget")]
    assert refused == [403] * 6
    assert Run.objects.get(id=waiting_run.id).status == RunStatus.WAITING
