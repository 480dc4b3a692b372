"""The Schedules page (durable/console/schedules.py): each schedule with its next fire time, its last run and what
its last look did, for whoever may view schedules."""
from __future__ import annotations

from datetime import timedelta
from uuid import uuid4
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from durable import schedules
from durable.console.schedule_forms import ScheduleForm
from durable.models import OperatorAction, Schedule
from durable.roles import OPERATOR, VIEWER
from durable.runtime.sweeper import sweep_all
from durable.store import store
from tests.conftest import make_user, user_with_roles
from tests.endpoints import logged_in

pytestmark = pytest.mark.django_db


def test_the_page_lists_each_schedule_with_its_next_fire_time_and_last_run():
    nightly = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *",
                               time_zone="Europe/Paris")
    Schedule.objects.filter(id=nightly.id).update(next_fire_at=store().db_now() - timedelta(seconds=1))
    sweep_all()
    schedules.create(user=None, name="weekly", workflow="test-trivial", cron="0 9 * * 1", paused=True)
    page = logged_in(user_with_roles("watcher", VIEWER)).get(reverse("durable:schedules"))
    assert page.status_code == 200
    text = page.content.decode()
    nightly.refresh_from_db()
    assert "nightly" in text and "30 2 * * *" in text and "Europe/Paris" in text
    assert reverse("durable:run-detail", args=[nightly.last_run_id]) in text and "started run" in text
    assert "weekly" in text and "paused" in text


def test_a_user_who_may_not_view_schedules_is_refused():
    assert logged_in(make_user("outsider")).get(reverse("durable:schedules")).status_code == 403


# Making, editing, pausing, resuming and deleting schedules (durable.manage_schedule), through durable/schedules.py

NEW = {"name": "nightly", "workflow": "test-trivial", "cron": "30 2 * * *", "time_zone": "Asia/Tokyo",
       "input": '{"n": 1}', "business_key_template": "", "overlap": "skip", "catch_up": "latest",
       "catch_up_window": "86400"}
EDIT = {**NEW, "business_key_template": "nightly:{fire_time:%Y-%m-%d}"}


@pytest.fixture
def manager():
    return logged_in(user_with_roles("scheduler", OPERATOR))


def audited(action: str) -> list[OperatorAction]:
    return list(OperatorAction.objects.filter(action=action).order_by("id"))


def test_a_new_schedule_is_made_through_the_service_audited_and_shown_with_its_next_three_fire_times(manager):
    form = manager.get(reverse("durable:schedule-new"))
    assert form.status_code == 200 and 'value="test-trivial"' in form.content.decode()
    made = manager.post(reverse("durable:schedule-new"), NEW)
    schedule = Schedule.objects.get(name="nightly")
    assert made.status_code == 302 and made["Location"] == reverse("durable:schedule-detail", args=[schedule.id])
    assert (schedule.cron, schedule.time_zone, schedule.input, schedule.paused) == (
        "30 2 * * *", "Asia/Tokyo", {"n": 1}, False)
    assert schedule.business_key_template == "nightly:{fire_time:%Y-%m-%dT%H:%M}"  # the service's default
    assert [entry.actor_username for entry in audited("create_schedule")] == ["scheduler"]
    page = manager.get(made["Location"]).content.decode()
    tokyo = ZoneInfo("Asia/Tokyo")  # no daylight saving time: 02:30 is there every night
    expected = [f"{store().db_now().astimezone(tokyo).date() + timedelta(days=day):%Y-%m-%d} 02:30" for day in range(4)]
    shown = [when for when in expected if when in page]
    assert len(shown) == 3 and shown == sorted(shown)  # the next three, read in the schedule's own time zone
    assert "{&quot;n&quot;: 1}" in page  # the input as JSON


@pytest.mark.parametrize(("field", "value", "says"), [
    ("cron", "61 * * * *", "is not a cron expression"),
    ("cron", "every night", "is not a cron expression"),
    ("time_zone", "Mars/Olympus", "is not a time zone"),
    ("workflow", "no-such-workflow", "Select a valid choice"),
    ("input", "{not json", "not valid JSON"),
    ("input", "[1, 2]", "a JSON object"),
    ("input", '{"n": "many"}', "n: "),
    ("business_key_template", "{nope}", "is not a field of a business key template"),
    ("overlap", "sometimes", "Select a valid choice"),
    ("catch_up", "everything", "Select a valid choice"),
    ("catch_up_window", "0", "greater than or equal to 1"),
    ("name", "two words", "letters, digits"),
])
def test_a_bad_field_rerenders_the_form_naming_it_and_writes_nothing(manager, field, value, says):
    response = manager.post(reverse("durable:schedule-new"), {**NEW, field: value})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was done" in page and says in page
    label = ScheduleForm().fields[field].label
    assert f"{label}: " in page  # the error is led by its field's label
    assert not Schedule.objects.exists() and not audited("create_schedule")


def test_a_name_already_taken_is_a_409_on_the_name(manager):
    schedules.create(user=None, name="nightly", workflow="test-trivial", cron="0 1 * * *")
    response = manager.post(reverse("durable:schedule-new"), NEW)
    assert response.status_code == 409 and "already exists" in response.content.decode()
    assert Schedule.objects.get().cron == "0 1 * * *"


def test_an_operators_schedule_is_edited_from_now_on_and_audited(manager):
    schedule = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *")
    form = manager.get(reverse("durable:schedule-edit", args=[schedule.id]))
    assert form.status_code == 200 and 'value="30 2 * * *"' in form.content.decode()
    edited = manager.post(reverse("durable:schedule-edit", args=[schedule.id]),
                          {**NEW, "name": "ignored", "cron": "0 4 * * *", "time_zone": "America/New_York",
                           "business_key_template": "nightly:{fire_time:%Y-%m-%d}"})
    assert edited.status_code == 302
    schedule.refresh_from_db()
    assert (schedule.name, schedule.cron, schedule.time_zone) == ("nightly", "0 4 * * *", "America/New_York")
    assert schedule.next_fire_at.astimezone(ZoneInfo("America/New_York")).hour == 4
    [entry] = audited("edit_schedule")
    assert entry.detail["cron"] == "0 4 * * *" and entry.actor_username == "scheduler"


def test_a_bad_edit_names_the_field_and_changes_nothing(manager):
    schedule = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *")
    response = manager.post(reverse("durable:schedule-edit", args=[schedule.id]), {**EDIT, "time_zone": "Nowhere"})
    assert response.status_code == 400 and "Time zone: " in response.content.decode()
    schedule.refresh_from_db()
    assert schedule.time_zone == "UTC" and not audited("edit_schedule")


def test_pause_and_resume_are_posts_audited_by_the_service_and_a_stale_one_is_a_409(manager):
    schedule = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *")
    pause, resume = (reverse(f"durable:schedule-{verb}", args=[schedule.id]) for verb in ("pause", "resume"))
    assert manager.get(pause).status_code == 405
    assert manager.post(pause).status_code == 302
    assert Schedule.objects.get().paused
    assert manager.post(pause).status_code == 409  # paused already: a page read before someone else's pause
    assert manager.post(resume).status_code == 302
    schedule.refresh_from_db()
    assert not schedule.paused and schedule.next_fire_at > store().db_now()
    assert [entry.status_after for entry in audited("edit_schedule")] == ["paused", "active"]


def test_delete_needs_its_confirmation_and_is_audited_with_the_reason(manager):
    schedule = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *")
    url = reverse("durable:schedule-delete", args=[schedule.id])
    unconfirmed = manager.post(url, {"reason": "the report moved"})
    assert unconfirmed.status_code == 400 and "I confirm" in unconfirmed.content.decode()
    assert Schedule.objects.exists()
    deleted = manager.post(url, {"reason": "the report moved", "confirm": "on"})
    assert deleted.status_code == 302 and deleted["Location"] == reverse("durable:schedules")
    assert not Schedule.objects.exists()
    [entry] = audited("delete_schedule")
    assert entry.reason == "the report moved"


def test_a_schedule_declared_in_code_may_be_paused_here_but_not_edited_or_deleted(manager):
    schedule = schedules.create(user=None, name="declared", workflow="test-trivial", cron="30 2 * * *",
                                declared_in_code=True)
    page = manager.get(reverse("durable:schedule-detail", args=[schedule.id])).content.decode()
    edit, delete = (reverse(f"durable:schedule-{verb}", args=[schedule.id]) for verb in ("edit", "delete"))
    assert edit not in page and delete not in page and reverse("durable:schedule-pause", args=[schedule.id]) in page
    assert manager.get(edit).status_code == 403
    assert manager.post(edit, {**EDIT, "cron": "0 4 * * *"}).status_code == 403
    assert manager.post(delete, {"reason": "x", "confirm": "on"}).status_code == 403
    assert manager.post(reverse("durable:schedule-pause", args=[schedule.id])).status_code == 302
    schedule.refresh_from_db()
    assert schedule.cron == "30 2 * * *" and schedule.paused


def test_a_viewer_sees_a_schedule_but_no_action_and_is_refused_each_one(manager):
    schedule = schedules.create(user=None, name="nightly", workflow="test-trivial", cron="30 2 * * *")
    viewer = logged_in(user_with_roles("watcher", VIEWER))
    detail = viewer.get(reverse("durable:schedule-detail", args=[schedule.id]))
    assert detail.status_code == 200 and "/pause/" not in detail.content.decode()
    assert reverse("durable:schedule-new") not in viewer.get(reverse("durable:schedules")).content.decode()
    assert viewer.get(reverse("durable:schedule-new")).status_code == 403
    assert viewer.post(reverse("durable:schedule-new"), NEW).status_code == 403
    for verb in ("edit", "pause", "resume", "delete"):
        assert viewer.post(reverse(f"durable:schedule-{verb}", args=[schedule.id]),
                           {"reason": "x", "confirm": "on"}).status_code == 403
    schedule.refresh_from_db()
    assert not schedule.paused and not audited("edit_schedule") and Schedule.objects.count() == 1


def test_a_schedule_that_does_not_exist_is_a_404(manager):
    assert manager.get(reverse("durable:schedule-detail", args=[uuid4()])).status_code == 404
