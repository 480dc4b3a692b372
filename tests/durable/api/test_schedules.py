"""The schedules API (durable/api/schedules.py): list with next fire times and last runs, create, edit, pause,
resume, delete; an invalid cron expression or time zone is a 400 naming the field with nothing written; a schedule
declared in code is paused here but edited in its code (403)."""
from __future__ import annotations

import pytest

from durable import schedules
from durable.models import OperatorAction, Schedule
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db

MANAGE, VIEW = "durable.manage_schedule", "durable.view_schedule"
NIGHTLY = {"name": "nightly", "workflow": "test-trivial", "cron": "30 2 * * *", "time_zone": "Europe/Paris",
           "input": {"n": 1}, "business_key_template": "nightly:{fire_time:%Y-%m-%d}", "catch_up": "all",
           "catch_up_window": 7200}


@pytest.fixture
def api(db):
    return client_for(make_user("planner", MANAGE, VIEW))


def test_a_schedule_is_created_listed_with_its_next_fire_time_and_read(api):
    made = api.post("/api/schedules/", NIGHTLY, format="json")
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["cron"], body["time_zone"], body["overlap"], body["paused"]) == ("30 2 * * *", "Europe/Paris",
                                                                                   "skip", False)
    assert body["next_fire_at"] and body["last_run"] is None
    listed = api.get("/api/schedules/").json()["results"]
    assert [s["name"] for s in listed] == ["nightly"] and listed[0]["next_fire_at"] == body["next_fire_at"]
    assert api.get(f"/api/schedules/{body['id']}/").json()["name"] == "nightly"
    assert OperatorAction.objects.filter(action="create_schedule", actor__username="planner").exists()


@pytest.mark.parametrize(("field", "value"), [("cron", "30 25 * * *"), ("cron", "every night"),
                                              ("time_zone", "Europe/Atlantis"), ("time_zone", "")])
def test_an_invalid_cron_expression_or_time_zone_is_a_400_naming_the_field_and_writes_nothing(api, field, value):
    refused = api.post("/api/schedules/", {**NIGHTLY, field: value}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == [field]
    assert not Schedule.objects.exists() and not OperatorAction.objects.filter(action="create_schedule").exists()


def test_an_edit_a_pause_and_a_resume_change_the_schedule_and_a_bad_edit_changes_nothing(api):
    made = api.post("/api/schedules/", NIGHTLY, format="json").json()
    url = f"/api/schedules/{made['id']}/"
    refused = api.post(f"{url}edit/", {"time_zone": "Nowhere/Else"}, format="json")
    assert refused.status_code == 400 and list(refused.json()) == ["time_zone"]
    assert Schedule.objects.get(id=made["id"]).time_zone == "Europe/Paris"
    edited = api.post(f"{url}edit/", {"cron": "0 3 * * 1", "overlap": "start_anyway"}, format="json").json()
    assert (edited["cron"], edited["overlap"]) == ("0 3 * * 1", "start_anyway")
    assert api.post(f"{url}edit/", {"paused": True}, format="json").json()["paused"] is True
    assert api.post(f"{url}edit/", {"paused": False}, format="json").json()["paused"] is False
    assert api.post(f"{url}delete/", {"reason": "the report moved"}, format="json").status_code == 204
    assert not Schedule.objects.exists()
    assert OperatorAction.objects.get(action="delete_schedule").reason == "the report moved"
    assert api.get(url).status_code == 404


def test_a_schedule_declared_in_code_is_paused_here_but_not_edited_or_deleted(api):
    declared = schedules.create(user=None, name="from-code", workflow="test-trivial", cron="0 * * * *",
                                declared_in_code=True)
    url = f"/api/schedules/{declared.id}/"
    assert api.post(f"{url}edit/", {"cron": "5 * * * *"}, format="json").status_code == 403
    assert api.post(f"{url}delete/", {}, format="json").status_code == 403
    assert api.post(f"{url}edit/", {"paused": True}, format="json").json()["paused"] is True


def test_a_viewer_reads_schedules_but_cannot_make_one(db):
    viewer = client_for(make_user("reader", VIEW))
    assert viewer.get("/api/schedules/").status_code == 200
    assert viewer.post("/api/schedules/", NIGHTLY, format="json").status_code == 403
    assert not Schedule.objects.exists()
