"""The Schedules page (durable/console/schedules.py): each schedule with its next fire time, its last run and what
its last look did, for whoever may view schedules."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from durable import schedules
from durable.models import Schedule
from durable.roles import VIEWER
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
