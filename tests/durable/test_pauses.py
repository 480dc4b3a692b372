"""Pausing runs and the kill switch, through the services the API, console and bulk actions call (durable/pauses.py);
the worker's side, with real workers, is tests/durable/runtime/test_pausing_worker.py."""
from __future__ import annotations

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from durable import bulk, pauses, services
from durable.engine.states import TERMINAL, RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import OperatorAction, PauseSwitch, Run
from tests.conftest import make_user
from tests.durable.console.screens import run_in
from tests.durable.test_exposition import samples, scrape

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_pause_of_a_run_that_has_ended_is_a_conflict_and_writes_nothing(status):
    run = run_in(status)
    with pytest.raises(Conflict, match=f"cannot pause a run that is {status}: it has ended"):
        pauses.pause_run(run_id=run.id, user=None, source="api", reason="too late")
    run.refresh_from_db()
    assert (run.status, run.pause_requested_at) == (status, None)
    assert not OperatorAction.objects.filter(action="pause").exists()


@pytest.mark.parametrize("status", [RunStatus.PENDING, RunStatus.WAITING, RunStatus.WAITING_RETRY,
                                    RunStatus.WAITING_APPROVAL])
def test_a_run_no_worker_holds_is_paused_at_once_keeping_what_it_waits_on(status):
    run = run_in(status, waiting_for={"kind": "timer"})
    paused = pauses.pause_run(run_id=run.id, user=make_user("ada"), source="api", reason="bad prompt")
    assert (paused.status, paused.pause_reason, paused.waiting_for) == (RunStatus.PAUSED, "bad prompt",
                                                                        {"kind": "timer"})
    with pytest.raises(Conflict, match="paused already"):
        pauses.pause_run(run_id=run.id, user=None, source="api", reason="again")
    resumed = pauses.resume_run(run_id=run.id, user=None, source="api", reason="fixed")
    assert (resumed.status, resumed.pause_requested_at, resumed.pause_reason) == (RunStatus.PENDING, None, "")
    assert list(OperatorAction.objects.order_by("created_at").values_list("action", "status_before", "status_after")
                ) == [("pause", status, "PAUSED"), ("resume", "PAUSED", "PENDING")]


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.NEEDS_ATTENTION, RunStatus.BLOCKED_VERSION])
def test_a_run_held_by_a_worker_or_for_an_operator_is_asked_and_resume_forgets_the_request(status):
    run = run_in(status)
    asked = pauses.pause_run(run_id=run.id, user=None, source="api", reason="stop it")
    assert asked.status == status and asked.pause_requested_at is not None
    forgotten = pauses.resume_run(run_id=run.id, user=None, source="api", reason="never mind")
    assert forgotten.status == status and forgotten.pause_requested_at is None


@pytest.mark.parametrize("status", [RunStatus.WAITING, RunStatus.SUCCEEDED])
def test_resume_of_a_run_neither_paused_nor_blocked_is_a_conflict(status):
    run = run_in(status, pause_requested_at=timezone.now() if status == RunStatus.SUCCEEDED else None)
    with pytest.raises(Conflict):  # one that ended before its worker saw the pause asked has nothing to resume
        pauses.resume_run(run_id=run.id, user=None, source="api", reason="?")


def test_a_kill_switch_pauses_a_workflows_runs_holds_new_starts_and_resumes_only_its_own():
    waiting, running = run_in(RunStatus.WAITING, business_key="w"), run_in(RunStatus.RUNNING, business_key="r")
    by_hand = run_in(RunStatus.PENDING, business_key="h")
    pauses.pause_run(run_id=by_hand.id, user=None, source="api", reason="a person's own pause")
    other = run_in(RunStatus.WAITING, business_key="o", workflow_name="another-workflow")
    switch, runs = pauses.pause_workflow(workflow="test-trivial", user=None, source="api", reason="prompt v3")
    assert runs == 2
    assert Run.objects.get(id=waiting.id).status == RunStatus.PAUSED
    assert Run.objects.get(id=running.id).pause_requested_at is not None  # its worker pauses it at a boundary
    assert Run.objects.get(id=other.id).status == RunStatus.WAITING  # another workflow
    held, created = services.start_run(workflow="test-trivial", input={}, business_key="new")
    assert created and (held.status, held.pause_reason, held.paused_by_switch) == (RunStatus.PAUSED, "prompt v3", True)
    with pytest.raises(Conflict, match="paused already"):
        pauses.pause_workflow(workflow="test-trivial", user=None, source="api", reason="again")

    assert pauses.resume_workflow(switch_id=switch.id, user=None, source="api", reason="v4 deployed") == 2
    statuses = dict(Run.objects.values_list("business_key", "status"))
    assert (statuses["w"], statuses["new"], statuses["h"]) == (RunStatus.PENDING, RunStatus.PENDING, RunStatus.PAUSED)
    assert Run.objects.get(id=running.id).pause_requested_at is None
    assert list(OperatorAction.objects.filter(run=None).values_list("action", flat=True).order_by("created_at")) == [
        "pause_workflow", "resume_workflow"]


def test_a_kill_switch_of_one_version_names_what_is_not_registered():
    with pytest.raises(InvalidInput) as refused:
        pauses.pause_workflow(workflow="no-such-workflow", version=7, user=None, source="api", reason="")
    assert set(refused.value.errors) == {"workflow", "version", "reason"}
    with pytest.raises(InvalidInput) as refused:
        pauses.pause_workflow(workflow="test-trivial", version=9, user=None, source="api", reason="x")
    assert set(refused.value.errors) == {"version"}
    assert not PauseSwitch.objects.exists()


def test_bulk_pause_and_resume_go_through_the_single_run_services():
    runs = [run_in(RunStatus.WAITING, business_key=f"b{n}") for n in range(2)]
    ended = run_in(RunStatus.SUCCEEDED, business_key="done")
    chosen = bulk.Selection.by_ids([r.id for r in [*runs, ended]])
    paused = bulk.perform(action="pause", selection=chosen, user=make_user("ada"), source="api", reason="hold")
    assert paused.counts()["paused"] == 2 and paused.counts()["not_applicable"] == 1
    resumed = bulk.perform(action="resume", selection=chosen, user=make_user("bob"), source="api", reason="go")
    assert resumed.counts()["resumed"] == 2


def test_metrics_count_the_paused_runs_and_how_long_the_longest_paused_one_stood_still(settings):
    settings.DURABLE_METRICS_TOKEN = "scrape-secret"
    run = run_in(RunStatus.WAITING)
    pauses.pause_run(run_id=run.id, user=None, source="api", reason="look first")
    scraped = samples(scrape(HTTP_AUTHORIZATION="Bearer scrape-secret"))
    assert scraped[("runs_paused", ())] == 1
    assert ("checkpoint_age_seconds", (("status", "PAUSED"),)) in scraped


def test_a_kill_switch_is_turned_off_and_on_again_through_the_api_by_post_never_delete():
    client = APIClient()
    client.force_authenticate(make_user("ops", "durable.view_run", "durable.pause_run"))
    waiting = run_in(RunStatus.WAITING, business_key="w")
    off = client.post("/api/pause-switches/", {"workflow": "test-trivial", "reason": "prompt v3"}, format="json")
    assert off.status_code == 201 and off.json()["runs"] == 1
    assert client.delete(f"/api/pause-switches/{off.json()['id']}/").status_code == 405
    on = client.post(f"/api/pause-switches/{off.json()['id']}/resume/", {"reason": "v4 deployed"}, format="json")
    assert (on.status_code, on.json()) == (200, {"resumed": 1})
    assert Run.objects.get(id=waiting.id).status == RunStatus.PENDING and not PauseSwitch.objects.exists()
