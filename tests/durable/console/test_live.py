"""Live run screens (durable/console/live.py): a poll is answered 304 while what the region shows is unchanged,
200 with the new state (and a new ETag) once it changed; an action answers with the region in the new status."""
import html as markup
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run
from tests.conftest import make_user
from tests.durable.console.screens import HTMX, action_url, client_for, detail_url, run_in, runs_url

pytestmark = pytest.mark.django_db


def poll(client, url, version):
    return client.get(url, HTTP_IF_NONE_MATCH=version, **HTMX)


def shown_version(response) -> str:
    """The version the live region in an answer shows (live.js sends it back as If-None-Match)."""
    return markup.unescape(re.search(r'data-version="([^"]*)"', response.content.decode()).group(1))


@pytest.fixture
def operator():
    return client_for(make_user("operator", "durable.view_run", "durable.cancel_run", "durable.retry_run"))


def test_a_run_page_answers_304_to_the_version_it_shows_until_the_run_changes(viewer):
    run = run_in(RunStatus.RUNNING)
    page = viewer.get(detail_url(run))
    version = page["ETag"]
    assert shown_version(page) == version
    unchanged = poll(viewer, detail_url(run), version)
    assert unchanged.status_code == 304 and unchanged.content == b"" and unchanged["ETag"] == version
    assert unchanged["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    Run.objects.filter(id=run.id).update(status=RunStatus.WAITING_RETRY)
    changed = poll(viewer, detail_url(run), version)
    assert changed.status_code == 200 and changed["ETag"] != version
    assert '<span id="run-status" class="status status-waiting_retry">WAITING_RETRY</span>' in changed.content.decode()


def test_a_new_journal_entry_changes_the_run_pages_version(viewer):
    run = run_in(RunStatus.RUNNING)
    version = viewer.get(detail_url(run))["ETag"]
    JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.ACTIVITY, step="plan", name="llm", detail={},
                                created_at=timezone.now())
    assert poll(viewer, detail_url(run), version).status_code == 200


def test_only_an_htmx_poll_is_answered_304_a_browser_always_gets_the_page(viewer):
    run = run_in(RunStatus.RUNNING)
    version = viewer.get(detail_url(run))["ETag"]
    page = viewer.get(detail_url(run), HTTP_IF_NONE_MATCH=version)
    assert page.status_code == 200 and "<html" in page.content.decode()


def test_the_version_is_the_users_own(viewer, operator):
    run = run_in(RunStatus.RUNNING)
    assert viewer.get(detail_url(run))["ETag"] != operator.get(detail_url(run))["ETag"]


def test_a_region_polls_at_the_configured_interval(viewer, settings):
    settings.DURABLE_CONSOLE_POLL_SECONDS = 7
    run = run_in(RunStatus.RUNNING)
    html = viewer.get(detail_url(run)).content.decode()
    assert f'<div id="run-live" data-answer-panel data-live hx-get="{detail_url(run)}" hx-trigger="every 7s"' in html


def test_a_304_poll_reads_one_state_query_and_never_the_contents(viewer):
    run = run_in(RunStatus.RUNNING)
    version = viewer.get(detail_url(run))["ETag"]
    with CaptureQueriesContext(connection) as queries:
        assert poll(viewer, detail_url(run), version).status_code == 304
    reads = [q["sql"] for q in queries.captured_queries]
    about_the_run = [sql for sql in reads if '"durable_run"' in sql]
    assert len(about_the_run) == 1, reads  # the state: the row and its newest entry, checkpoint, ledger change
    assert not [sql for sql in reads if sql.lstrip().startswith('SELECT "durable_journalentry"')]


def test_the_runs_list_is_live_and_changes_version_when_a_listed_run_changes(viewer):
    run = run_in(RunStatus.RUNNING, business_key="ORD-7")
    page = viewer.get(runs_url(), {"business_key": "ORD-7"})
    assert '<tbody id="run-rows" data-live data-live-location' in page.content.decode()
    version = page["ETag"]
    assert poll(viewer, f"{runs_url()}?business_key=ORD-7", version).status_code == 304
    Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED)
    rows = poll(viewer, f"{runs_url()}?business_key=ORD-7", version)
    assert rows.status_code == 200 and "SUCCEEDED" in rows.content.decode()
    assert rows.content.decode().lstrip().startswith('<tr class="run-row">')


def test_a_new_run_elsewhere_in_the_filter_is_a_change_a_run_outside_it_is_not(viewer):
    run_in(RunStatus.RUNNING, business_key="ORD-7")
    url = f"{runs_url()}?business_key=ORD-7"
    version = viewer.get(url)["ETag"]
    run_in(RunStatus.RUNNING, business_key="ORD-8")
    assert poll(viewer, url, version).status_code == 304
    run_in(RunStatus.RUNNING, business_key="ORD-7")
    assert poll(viewer, url, version).status_code == 200


# After an action: the new truth, and only the actions still possible

@pytest.mark.parametrize("status,action,offered_after,not_offered_after", [
    (RunStatus.FAILED, "retry", ["Cancel the run"], ["Retry now"]),
    (RunStatus.WAITING_RETRY, "cancel", [], ["Cancel the run", "Retry now"]),
    (RunStatus.PENDING, "cancel", [], ["Cancel the run"]),
])
def test_after_an_action_the_region_offers_only_the_actions_of_the_new_status(
        operator, status, action, offered_after, not_offered_after):
    run = run_in(status, error={"kind": "transient", "message": "busy"})
    answer = operator.post(action_url(run, action), {"reason": "checked", "confirm": "on"}, **HTMX)
    html = answer.content.decode()
    assert answer.status_code == 200
    assert all(f"<summary>{label}…</summary>" in html for label in offered_after)
    assert not any(f"<summary>{label}…</summary>" in html for label in not_offered_after)
    # The region carries the version of the state it shows: the next poll is a 304 and keeps the outcome shown.
    assert poll(operator, detail_url(run), answer["ETag"]).status_code == 304


def test_a_conflicting_action_answers_409_with_the_run_as_it_is_now(operator):
    run = run_in(RunStatus.RUNNING)
    page_version = operator.get(detail_url(run))["ETag"]
    Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED)  # another operator, or the worker, won
    answer = operator.post(action_url(run, "cancel"), {"reason": "", "confirm": "on"}, **HTMX)
    html = answer.content.decode()
    assert answer.status_code == 409 and "Cannot cancel a run that is SUCCEEDED." in html
    assert '<span id="run-status" class="status status-succeeded">SUCCEEDED</span>' in html
    assert "<summary>Cancel the run…</summary>" not in html and shown_version(answer) != page_version
    assert poll(operator, detail_url(run), shown_version(answer)).status_code == 304
