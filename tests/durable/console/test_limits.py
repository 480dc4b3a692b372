"""Limits in the console (docs/operations.md, "Limits"): the Limits page lists each limit with its use, its
waiting runs and its pause; a run waiting on a limit says so on its page and in the runs list; a run's page shows
its priority."""
import re
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.models import LimitGate, Run
from durable.permissions import CONTENTS_PERMISSIONS
from durable.store import limits as rows
from tests.conftest import make_user
from tests.durable.claims import advance
from tests.durable.console.screens import VIEW, client_for, detail_url
from tests.durable.limit_workflows import during_call

pytestmark = pytest.mark.django_db(transaction=True)


def read(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 1}, "openai": {"rate": "500/m", "tokens": "200000/m"}}
    yield
    during_call.clear()


def parked_behind_a_holder(calls_file: str) -> tuple[Run, list[str]]:
    """A run parked on test-limit while another's call held its only slot; the Limits page as read then."""
    waiter, _ = services.start_run(workflow="test-limited", input={"calls_file": calls_file}, business_key="B",
                                   priority=7)
    seen: list[str] = []

    def look() -> None:
        if not seen:
            seen.append("")
            advance(waiter)
            seen.append(read(client_for_viewer().get("/limits/").content.decode()))

    during_call.append(look)
    holder, _ = services.start_run(workflow="test-limited", input={"calls_file": calls_file}, business_key="A")
    advance(holder)
    during_call.clear()
    return waiter, seen[1:]


def client_for_viewer() -> Client:
    user = User.objects.filter(username="viewer").first() or make_user("viewer", VIEW, *CONTENTS_PERMISSIONS)
    return client_for(user)


def test_the_limits_page_lists_each_limit_with_its_use_and_its_waiting_runs(calls_file):
    _, seen = parked_behind_a_holder(calls_file)
    page = seen[0]
    assert "test-limit 1 at once In use Waiting runs 1 / 1 1" in page
    assert "openai 500/m started, 200000/m LLM tokens" in page


def test_a_paused_limit_says_until_when(calls_file):
    rows.pause("openai", timezone.now() + timedelta(minutes=5))
    assert LimitGate.objects.get(limit="openai").paused_until is not None
    page = read(client_for_viewer().get("/limits/").content.decode())
    assert "openai paused until" in page


def test_a_run_waiting_on_a_limit_says_so_on_its_page_and_in_the_runs_list(calls_file):
    waiter, _ = parked_behind_a_holder(calls_file)
    waiter.refresh_from_db()
    assert waiter.status == RunStatus.PENDING  # woken once the slot was given back: park it again to look at it
    Run.objects.filter(id=waiter.id).update(status=RunStatus.WAITING, next_attempt_at=timezone.now()
                                            + timedelta(seconds=10))
    page = read(client_for_viewer().get(detail_url(waiter)).content.decode())
    assert "Waiting for limit 'test-limit' to have room" in page
    assert "Limit test-limit" in page and "Priority 7 (goes before runs of lower priority" in page
    listed = read(client_for_viewer().get("/runs/?status=WAITING&waiting=limit").content.decode())
    assert "limit test-limit" in listed


def test_the_limits_page_needs_a_login():
    assert Client().get("/limits/").status_code == 302
