"""Processes record themselves and the workflows they loaded, so 'no workflow named X' says what to restart."""
from __future__ import annotations

import os
import socket
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from durable import fleet
from durable.models import Process
from durable.tools.processes import WebProcess
from tests.conftest import ALL_RUN_PERMS, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def unrecorded():
    """This test process has recorded itself as nothing yet (fleet remembers the kind it recorded)."""
    fleet._recorded_as.clear()
    fleet._web_seen_at.clear()
    yield
    fleet._recorded_as.clear()
    fleet._web_seen_at.clear()


def worker_row(hostname: str, pid: int, workflows: list[str], seen_ago: float = 1.0) -> Process:
    seen = timezone.now() - timedelta(seconds=seen_ago)
    return Process.objects.create(kind=Process.Kind.WORKER, hostname=hostname, pid=pid, started_at=seen,
                                  last_seen=seen, workflows=workflows)


def test_a_process_records_itself_with_the_workflows_it_loaded_and_rewrites_a_reused_pid():
    worker_row(socket.gethostname(), os.getpid(), ["gone@1"], seen_ago=3600)  # an earlier process, same pid
    fleet.record(Process.Kind.WORKER)
    row = Process.objects.get(hostname=socket.gethostname(), pid=os.getpid())
    assert row.kind == "worker" and "test-counting@1" in row.workflows and "gone@1" not in row.workflows
    assert row.last_seen > timezone.now() - timedelta(seconds=5)


def test_a_workers_beat_refreshes_last_seen_and_gone_processes_are_forgotten_after_a_day():
    fleet.record(Process.Kind.WORKER)
    Process.objects.update(last_seen=timezone.now() - timedelta(minutes=5))
    fleet.seen(Process.Kind.WORKER)
    assert Process.objects.get(pid=os.getpid()).last_seen > timezone.now() - timedelta(seconds=5)
    worker_row("old-host", 1, [], seen_ago=2 * 86400)
    assert fleet.forget_gone() == 1
    assert list(Process.objects.values_list("hostname", flat=True)) == [socket.gethostname()]


def test_a_web_process_records_itself_at_its_first_request_from_a_real_server_and_beats_at_most_every_15_s():
    # The receiver alone: request_started's other receivers would close the test's database connection.
    fleet._web_request(sender=None, environ={"PATH_INFO": "/"})  # the test client: no server software
    assert not Process.objects.exists()
    gunicorn = {"SERVER_SOFTWARE": "gunicorn/23.0.0"}
    fleet._web_request(sender=None, environ=gunicorn)
    row = Process.objects.get(pid=os.getpid())
    assert row.kind == "web"
    Process.objects.update(last_seen=row.last_seen - timedelta(minutes=1))
    fleet._web_request(sender=None, environ=gunicorn)  # within the beat: no write
    assert Process.objects.get(pid=os.getpid()).last_seen < row.last_seen
    fleet._web_seen_at[0] -= fleet.PROCESS_BEAT_SECONDS
    fleet._web_request(sender=None, environ=gunicorn)
    assert Process.objects.get(pid=os.getpid()).last_seen >= row.last_seen


@pytest.mark.django_db(transaction=True)  # the gunicorn process reads and writes the committed test database
def test_a_real_gunicorn_process_records_itself_and_its_workflows_at_its_first_request(tmp_path):
    web = WebProcess(log_path=tmp_path / "web.log").start()
    try:
        assert not Process.objects.filter(kind=Process.Kind.WEB).exists()  # started, not yet asked anything
        answer = httpx.get(f"{web.url}/accounts/login/", timeout=30)
        assert answer.status_code == 200, answer.text
        row = Process.objects.get(kind=Process.Kind.WEB)  # written before the request was answered
    finally:
        web.stop()
    assert web.process is not None and row.pid != os.getpid()  # gunicorn's worker, not this test process
    assert row.hostname == socket.gethostname() and "test-counting@1" in row.workflows


def test_an_unknown_workflow_names_the_live_workers_that_have_it_and_what_to_restart():
    worker_row("w1", 11, ["refunds@1", "refunds@2"])
    worker_row("w2", 12, ["refunds@2"])
    worker_row("w3", 13, ["refunds@2"], seen_ago=3600)  # gone: not named
    worker_row("w4", 14, ["other@1"])
    message = fleet.not_loaded_here("refunds")
    assert f"this process, {socket.gethostname()}:{os.getpid()}" in message
    assert "worker w1:11, worker w2:12 have loaded it" in message and "w3" not in message
    assert "worker w4:14 has not loaded it either" in message  # live, and lacking it too: restart it as well
    assert "restart the processes started before it was deployed" in message and "docs/workflows.md" in message


def test_an_unknown_workflow_no_process_has_says_to_add_its_module_and_restart_everything():
    message = fleet.not_loaded_here("refunds")
    assert "nor in any process seen in the last" in message and "DURABLE_WORKFLOW_MODULES" in message


def test_an_api_start_of_a_workflow_this_web_process_lacks_answers_400_naming_the_workers_that_have_it():
    worker_row("w1", 11, ["refunds@1"])
    fleet.record(Process.Kind.WEB)
    client = APIClient()
    client.force_authenticate(make_user("starter", *ALL_RUN_PERMS))
    response = client.post("/api/runs/", {"workflow": "refunds", "business_key": "R-1", "input": {}}, format="json")
    assert response.status_code == 400
    (error,) = response.data["workflow"]
    assert "no workflow named 'refunds' is registered in this web process" in error
    assert "worker w1:11 has loaded it" in error and "restart the processes" in error
