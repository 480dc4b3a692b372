"""The console's runs list: filters, keyset pages, htmx fragments."""
import re
from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from durable.console import views
from durable.engine.states import RunStatus
from durable.models import Run
from tests.conftest import make_user
from tests.durable.console.screens import HTMX, detail_url, run_in, runs_url

pytestmark = pytest.mark.django_db


def test_the_runs_list_lives_under_runs_and_the_overview_is_the_console_home():
    assert (runs_url(), reverse("durable:overview")) == ("/runs/", "/")


def test_anonymous_visitors_are_sent_to_the_login_page():
    run = run_in(RunStatus.PENDING)
    for url in (reverse("durable:overview"), runs_url(), detail_url(run)):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"] == f"{reverse('durable:login')}?next={url}"


def test_a_user_without_view_run_is_forbidden():
    run = run_in(RunStatus.PENDING)
    client = Client()
    client.force_login(make_user("outsider", "durable.start_run"))
    for url in (reverse("durable:overview"), runs_url(), detail_url(run)):
        assert client.get(url).status_code == 403


def test_the_runs_list_shows_runs_with_their_status(viewer):
    run = run_in(RunStatus.WAITING_RETRY, business_key="ORD-1001")
    response = viewer.get(runs_url())
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and "ORD-1001" in html and "WAITING_RETRY" in html
    assert detail_url(run) in html


def test_the_runs_list_says_so_when_nothing_matches(viewer):
    assert "No runs match" in viewer.get(runs_url()).content.decode()


def test_filters_narrow_the_list(viewer):
    run_in(RunStatus.FAILED, business_key="bk-failed")
    run_in(RunStatus.SUCCEEDED, business_key="bk-succeeded")
    run_in(RunStatus.SUCCEEDED, business_key="bk-third")
    html = viewer.get(runs_url(), {"status": "FAILED"}).content.decode()
    assert "bk-failed" in html and "bk-succeeded" not in html and "bk-third" not in html
    html = viewer.get(runs_url(), {"business_key": "bk-third"}).content.decode()
    assert "bk-third" in html and "bk-failed" not in html and "bk-succeeded" not in html
    html = viewer.get(runs_url(), {"status": "SUCCEEDED", "workflow": "test-trivial"}).content.decode()
    assert "bk-succeeded" in html and "bk-third" in html and "bk-failed" not in html
    html = viewer.get(runs_url(), {"workflow": "claims-agent"}).content.decode()
    assert "No runs match" in html and "bk-" not in html


def test_the_version_filter_narrows_to_one_workflow_version(viewer):
    run_in(RunStatus.PENDING, workflow="test-versioned", version=1, business_key="on-v1")
    run_in(RunStatus.PENDING, workflow="test-versioned", version=1, business_key="on-v2", workflow_version=2)
    html = viewer.get(runs_url(), {"workflow": "test-versioned", "version": "2"}).content.decode()
    assert "on-v2" in html and "on-v1" not in html


def created_on(day: int, business_key: str) -> Run:
    return run_in(RunStatus.SUCCEEDED, business_key=business_key, created_at=datetime(2025, 3, day, 12, tzinfo=UTC))


def test_the_created_date_range_keeps_runs_from_the_first_day_up_to_before_the_second(viewer):
    created_on(1, "march-1")
    created_on(2, "march-2")
    created_on(3, "march-3")
    html = viewer.get(runs_url(), {"created_after": "2025-03-02", "created_before": "2025-03-03"}).content.decode()
    assert "march-2" in html and "march-1" not in html and "march-3" not in html
    html = viewer.get(runs_url(), {"created_after": "2025-03-02"}).content.decode()
    assert "march-2" in html and "march-3" in html and "march-1" not in html
    # The form keeps the range it filtered by.
    assert 'name="created_after" type="date" value="2025-03-02"' in html


def test_a_bad_date_is_named_and_shows_no_runs(viewer):
    created_on(1, "march-1")
    response = viewer.get(runs_url(), {"created_after": "last tuesday"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Created on or after: Datetime has wrong format" in html and "march-1" not in html


def test_empty_filter_fields_do_not_filter(viewer):
    run_in(RunStatus.FAILED, business_key="failed-one")
    html = viewer.get(runs_url(), {"status": "", "workflow": "", "version": "", "business_key": "", "q": "",
                                   "created_after": "", "created_before": ""}).content.decode()
    assert "failed-one" in html


def test_a_bad_filter_is_named_on_the_page(viewer):
    response = viewer.get(runs_url(), {"status": "DONE"})
    assert response.status_code == 400
    assert "Status: unknown status DONE" in response.content.decode()


def test_an_htmx_request_gets_only_the_rows_fragment(viewer):
    run_in(RunStatus.FAILED, business_key="failed-one")
    run_in(RunStatus.SUCCEEDED, business_key="succeeded-one")
    response = viewer.get(runs_url(), {"status": "FAILED"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "<form" not in html
    assert html.lstrip().startswith('<tr class="run-row">')
    assert "failed-one" in html and "succeeded-one" not in html
    assert "HX-Request" in response["Vary"]


def test_the_filter_form_pushes_its_query_into_the_address_bar(viewer):
    html = viewer.get(runs_url()).content.decode()
    assert f'hx-get="{runs_url()}" hx-target="#run-rows"' in html and 'hx-push-url="true"' in html


# Search


def test_the_old_search_box_of_the_runs_list_is_answered_by_the_header_search(viewer):
    response = viewer.get(runs_url(), {"q": "ORD 1001"})
    assert (response.status_code, response["Location"]) == (302, f"{reverse('durable:search')}?q=ORD+1001")


# Pages


@pytest.fixture
def pages_of_two(monkeypatch):
    monkeypatch.setattr(views, "PAGE", 2)


def test_the_next_page_link_keeps_the_filters_and_yields_the_next_runs(viewer, pages_of_two):
    failed = [run_in(RunStatus.FAILED, business_key=f"failed-{n}") for n in range(5)]
    run_in(RunStatus.SUCCEEDED, business_key="succeeded")
    first = viewer.get(runs_url(), {"status": "FAILED"})
    assert [r.business_key for r in first.context["runs"]] == ["failed-4", "failed-3"]
    next_page = first.context["next_page"]
    assert next_page.startswith(f"{runs_url()}?status=FAILED&after=") and next_page.replace("&", "&amp;") in \
        first.content.decode()
    second = viewer.get(next_page)
    assert [r.business_key for r in second.context["runs"]] == ["failed-2", "failed-1"]
    assert second.context["first_page"] == f"{runs_url()}?status=FAILED"
    last = viewer.get(second.context["next_page"], **HTMX)
    assert [r.id for r in last.context["runs"]] == [failed[0].id] and last.context["next_page"] == ""
    assert 'hx-push-url="true"' in last.content.decode()  # First page, as a pushed link


def test_runs_created_at_the_same_instant_are_paged_by_id_without_loss_or_repeat(viewer, pages_of_two):
    same = datetime(2025, 3, 1, tzinfo=UTC)
    runs = [run_in(RunStatus.PENDING, business_key=f"same-{n}", created_at=same) for n in range(5)]
    seen, url = [], runs_url()
    while url:
        response = viewer.get(url)
        seen += [r.id for r in response.context["runs"]]
        url = response.context["next_page"]
    assert seen == sorted((r.id for r in runs), reverse=True)


def test_a_forged_page_marker_asks_to_start_again(viewer):
    html = viewer.get(runs_url(), {"after": "yesterday"}).content.decode()
    assert "Page: not a page of this list; start again from the first page" in html


# Waiting runs: the statuses that wait, and what a parked run waits for


@pytest.fixture
def waiting_runs(tmp_path):
    """One run in each waiting status, parked on each kind of wait, and a running one."""
    from tests.durable.console.parked import parked

    return {"approval": run_in(RunStatus.WAITING_APPROVAL, business_key="A"),
            "retry": run_in(RunStatus.WAITING_RETRY, business_key="R"),
            "timer": parked("test-sleep", tmp_path, key="T", seconds=7200),
            "event": parked("test-wait-event", tmp_path, key="E", seconds=0, names=["reply", "declined"]),
            "child": parked("test-parent", tmp_path, key="C", children=2),
            "running": run_in(RunStatus.RUNNING, business_key="X")}


def listed(client, **query) -> list[str]:
    return [run.business_key for run in client.get(runs_url(), query).context["runs"]]


@pytest.mark.django_db(transaction=True)
def test_any_waiting_lists_the_runs_in_every_waiting_status(viewer, waiting_runs):
    page = viewer.get(runs_url()).content.decode()
    assert '<option value="WAITING_APPROVAL,WAITING_RETRY,WAITING" >any waiting</option>' in page
    assert sorted(listed(viewer, status="WAITING_APPROVAL,WAITING_RETRY,WAITING")) == ["A", "C", "E", "R", "T"]
    assert sorted(listed(viewer, status="WAITING")) == ["C", "E", "T"]


@pytest.mark.django_db(transaction=True)
def test_waiting_for_a_timer_an_event_or_child_runs_lists_the_runs_parked_on_it(viewer, waiting_runs):
    assert (listed(viewer, waiting="timer"), listed(viewer, waiting="event"), listed(viewer, waiting="child")) == (
        ["T"], ["E"], ["C"])
    page = viewer.get(runs_url(), {"waiting": "event"}).content.decode()
    assert '<option value="event" selected>an event</option>' in page


@pytest.mark.django_db(transaction=True)
def test_a_parked_runs_row_says_what_it_waits_for_and_the_time_left(viewer, waiting_runs):
    html = viewer.get(runs_url()).content.decode()
    rows = {key.group(1): row for row in html.split('<tr class="run-row">')[1:]
            if (key := re.search(r"<td>([A-Z])</td>", row))}  # the parent's children are listed too
    assert '<span class="status status-waiting">WAITING</span>' in rows["T"]
    assert re.search(r'<small class="waits-for">timer, 1 h 59 min left</small>', rows["T"]), rows["T"]
    assert '<small class="waits-for">event reply or declined, no deadline</small>' in rows["E"]
    assert '<small class="waits-for">2 child runs</small>' in rows["C"]
    assert "waits-for" not in rows["A"] + rows["R"] + rows["X"]


def test_an_unknown_kind_of_wait_is_named_and_shows_no_runs(viewer):
    run_in(RunStatus.PENDING)
    response = viewer.get(runs_url(), {"waiting": "approval"})
    assert 'Waiting: &quot;approval&quot; is not a valid choice.' in response.content.decode()
    assert response.context["runs"] == []


@pytest.mark.django_db(transaction=True)
def test_the_runs_list_reads_as_many_queries_for_many_parked_runs_as_for_one(viewer, tmp_path):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.durable.console.parked import parked

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get(runs_url(), {"status": "WAITING"}).status_code == 200
        return len(captured.captured_queries)

    parked("test-sleep", tmp_path, key="T-0")
    queries()  # the first page of a session also keeps the operator's time zone in it
    one = queries()
    for n in range(1, 6):
        parked("test-wait-event" if n % 2 else "test-sleep", tmp_path, key=f"T-{n}", seconds=0 if n % 2 else 60)
    assert queries() == one
