"""What the runs API says of waiting runs (durable/api/serializers.py, filters.py): `waiting_for` with the time
left, a run's parent and a link to its children, and the runs list filtered by what its runs wait for."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db

RUNS = "/api/runs/"


def start(workflow: str, tmp_path, key: str = "W-1", **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(tmp_path / "calls"), **given},
                                business_key=key)
    return advance(run)


def listed(api, **filters) -> set[str]:
    response = api.get(RUNS, filters)
    assert response.status_code == 200, response.content
    return {run["id"] for run in response.json()["results"]}


def test_a_sleeping_run_says_until_when_and_the_seconds_left(tmp_path, api):
    run = start("test-sleep", tmp_path, seconds=3600)
    body = api.get(f"{RUNS}{run.id}/").json()
    waits = body["waiting_for"]
    assert (body["status"], waits["kind"], waits["step"], waits["visit"]) == ("WAITING", "timer", "remind", 0)
    assert waits["until"] is not None and 3500 < waits["seconds_left"] <= 3600
    assert waits["events"] == [] and waits["children"] == [] and waits["summary"].startswith("a timer until")


def test_an_event_wait_names_its_events_and_without_a_deadline_has_no_time_left(tmp_path, api):
    run = start("test-wait-event", tmp_path, seconds=0, names=["approved", "declined"])
    waits = api.get(f"{RUNS}{run.id}/").json()["waiting_for"]
    assert (waits["kind"], waits["events"], waits["until"], waits["seconds_left"]) == (
        "event", ["approved", "declined"], None, None)
    assert waits["summary"] == "event 'approved' or 'declined' (no deadline)"


def test_an_event_wait_with_a_deadline_counts_down_to_it(tmp_path, api):
    run = start("test-wait-event", tmp_path, seconds=600)
    waits = api.get(f"{RUNS}{run.id}/").json()["waiting_for"]
    assert waits["kind"] == "event" and 500 < waits["seconds_left"] <= 600


def test_a_deadline_that_passed_before_the_sweeper_woke_the_run_has_no_time_left(tmp_path, api):
    run = start("test-sleep", tmp_path, seconds=3600)
    past = timezone.now() - timedelta(seconds=5)
    Run.objects.filter(id=run.id).update(waiting_for={**run.waiting_for, "until": past.isoformat()})
    assert api.get(f"{RUNS}{run.id}/").json()["waiting_for"]["seconds_left"] == 0


def test_a_parent_names_the_children_it_waits_for_and_each_child_its_parent(tmp_path, api):
    parent = start("test-parent", tmp_path, children=2)
    children = sorted(str(child.id) for child in Run.objects.filter(parent_run=parent))
    body = api.get(f"{RUNS}{parent.id}/").json()
    assert body["waiting_for"]["kind"] == "child" and sorted(body["waiting_for"]["children"]) == children
    assert body["parent_run"] is None
    assert sorted(listed_by_link(api, body["children"])) == children
    child = api.get(f"{RUNS}{children[0]}/").json()
    assert child["parent_run"] == str(parent.id) and listed_by_link(api, child["children"]) == []


def listed_by_link(api, link: str) -> list[str]:
    response = api.get(link)
    assert response.status_code == 200, response.content
    return [run["id"] for run in response.json()["results"]]


def test_a_run_that_no_longer_waits_shows_no_waiting_for(tmp_path, api):
    run = start("test-sleep", tmp_path, seconds=3600)
    Run.objects.filter(id=run.id).update(status=RunStatus.PENDING)  # woken: its record of the wait lingers
    assert Run.objects.get(id=run.id).waiting_for is not None
    assert api.get(f"{RUNS}{run.id}/").json()["waiting_for"] is None
    assert api.get(RUNS).json()["results"][0]["waiting_for"] is None


def test_the_list_filters_waiting_runs_by_what_they_wait_for(tmp_path, api):
    sleeping = start("test-sleep", tmp_path, key="S")
    listening = start("test-wait-event", tmp_path, key="E", seconds=0)
    parent = start("test-parent", tmp_path, key="P")
    child = Run.objects.get(parent_run=parent)
    woken = start("test-sleep", tmp_path, key="woken")
    Run.objects.filter(id=woken.id).update(status=RunStatus.PENDING)  # its record of the timer lingers
    ids = {name: str(run.id) for name, run in
           {"sleeping": sleeping, "listening": listening, "parent": parent, "child": child, "woken": woken}.items()}
    assert listed(api, status="WAITING") == {ids["sleeping"], ids["listening"], ids["parent"]}
    assert listed(api, waiting_for="timer") == {ids["sleeping"]}
    assert listed(api, waiting_for="event") == {ids["listening"]}
    assert listed(api, waiting_for="child") == {ids["parent"]}
    assert listed(api, parent_run=ids["parent"]) == {ids["child"]}
    assert listed(api, status="PENDING", waiting_for="timer") == set()


@pytest.mark.parametrize("name,value", [("waiting_for", "approval"), ("waiting_for", "\x00"),
                                        ("parent_run", "not-a-run"), ("status", "SLEEPING")])
def test_a_bad_wait_filter_is_a_400_naming_it(api, name, value):
    response = api.get(RUNS, {name: value})
    assert response.status_code == 400 and name in response.json()


def test_the_list_costs_the_same_queries_for_many_waiting_runs_as_for_one(tmp_path, api):
    """waiting_for, parent_run and children come from the run's own row: no query per run."""
    start("test-parent", tmp_path, key="P-0")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert api.get(RUNS, {"page_size": 100}).status_code == 200
        return len(captured)

    queries()  # the user's permissions, read once and cached
    few = queries()
    for n in range(5):
        start("test-sleep", tmp_path, key=f"S-{n}")
        start("test-wait-event", tmp_path, key=f"E-{n}", seconds=600)
    assert len(api.get(RUNS, {"page_size": 100}).json()["results"]) == 12
    assert queries() == few
