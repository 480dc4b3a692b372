"""The Paused workflows page: a kill switch turned off and on again from the console, each behind a reason."""
from __future__ import annotations

import pytest
from django.urls import reverse

from durable.engine.states import RunStatus
from durable.models import PauseSwitch, Run
from tests.conftest import user_with_roles
from tests.durable.console.screens import run_in
from tests.endpoints import logged_in

pytestmark = pytest.mark.django_db


def test_an_operator_pauses_a_workflow_and_makes_it_run_again_from_the_console():
    client = logged_in(user_with_roles("pause-console", "operator"))
    waiting = run_in(RunStatus.WAITING)
    answer = client.post(reverse("durable:paused"), {"workflow": "test-trivial", "reason": "bad prompt",
                                                     "confirm": "on"})
    assert answer.status_code == 302
    assert Run.objects.get(id=waiting.id).status == RunStatus.PAUSED
    page = client.get(reverse("durable:paused"))
    assert "bad prompt" in page.content.decode() and "every version" in page.content.decode()
    switch = PauseSwitch.objects.get()
    answer = client.post(reverse("durable:paused-resume", args=[switch.id]), {"reason": "fixed", "confirm": "on"})
    assert answer.status_code == 302 and not PauseSwitch.objects.exists()
    assert Run.objects.get(id=waiting.id).status == RunStatus.PENDING


def test_a_pause_without_a_reason_or_of_a_version_not_registered_is_a_400_naming_the_field():
    client = logged_in(user_with_roles("pause-console", "operator"))
    answer = client.post(reverse("durable:paused"), {"workflow": "test-trivial", "version": "9", "reason": "x",
                                                     "confirm": "on"})
    assert answer.status_code == 400 and "has no version 9" in answer.content.decode()
    answer = client.post(reverse("durable:paused"), {"workflow": "test-trivial", "reason": "", "confirm": "on"})
    assert answer.status_code == 400
    assert not PauseSwitch.objects.exists()


def test_a_viewer_sees_the_page_without_its_forms():
    client = logged_in(user_with_roles("pause-viewer", "viewer"))
    page = client.get(reverse("durable:paused"))
    assert page.status_code == 200 and "Pause every run" not in page.content.decode()
