"""The audit trail screens: every operator action, newest first, filtered, paged and exported; append-only."""
import csv
import io
import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.html import strip_tags

from durable import services
from durable.audit import audit
from durable.engine.states import RunStatus
from durable.models import OperatorAction, Run
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.console.screens import HTMX, client_for

pytestmark = pytest.mark.django_db

VIEW = "durable.view_operatoraction"
OPERATION = "ab" * 16
HEADER = ["when", "actor", "action", "run", "operation_id", "source", "status_before", "status_after", "reason",
          "detail"]


@pytest.fixture
def auditor():
    """One who may read everything, so no grant of theirs joins the trail the tests count (test_role_audit.py)."""
    return client_for(User.objects.create_superuser("auditor", password="pw-auditor-long-enough"))


def new_run(business_key="k"):
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key=business_key)
    return run


def failed_run(business_key="k"):
    run = new_run(business_key)
    Run.objects.filter(id=run.id).update(status=RunStatus.FAILED)
    return run


@pytest.fixture
def trail():
    """Three actions by two people, through the services they call: alice cancels, then bob retries and resolves."""
    alice, bob = make_user("alice"), make_user("bob")
    cancelled, retried = new_run("ORD-1"), failed_run("ORD-2")
    services.cancel_run(run_id=cancelled.id, user=alice, source="console", reason="duplicate order")
    services.retry_run(run_id=retried.id, user=bob, source="api", reason="payments is back")
    audit(user=bob, action="resolve_operation", run=retried, operation_id=OPERATION, source="console",
                   status_before="UNKNOWN", status_after="SUCCEEDED", reason="=seen in the outbox",
                   detail={"external_ref": "ntf-1", "outcome": "succeeded"})
    return {"cancelled": cancelled, "retried": retried}


def trail_url(**query):
    return f"{reverse('audit:trail')}?{urlencode(query)}" if query else reverse("audit:trail")


def export_url(**query):
    return f"{reverse('audit:export')}?{urlencode(query)}" if query else reverse("audit:export")


def shown(html):
    return html.count('class="audit-row"')


def exported(response):
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


# Who may read it


def test_the_trail_lives_under_audit():
    assert (trail_url(), export_url()) == ("/audit/", "/audit/export.csv")


def test_anonymous_visitors_are_sent_to_the_login_page():
    for url in (trail_url(), export_url()):
        assert Client().get(url)["Location"] == f"{reverse('durable:login')}?next={url}"


def test_without_view_operatoraction_the_trail_is_forbidden():
    outsider = client_for(make_user("outsider", "durable.view_run", "durable.view_sideeffect"))
    assert outsider.get(trail_url()).status_code == 403
    assert outsider.get(export_url()).status_code == 403
    assert f'href="{trail_url()}"' not in outsider.get(reverse("durable:runs")).content.decode()


def test_the_nav_links_to_the_trail_for_those_who_may_read_it(auditor):
    assert f'href="{trail_url()}"' in auditor.get(trail_url()).content.decode()


# Append-only


def test_no_url_edits_or_deletes_an_action(auditor, trail):
    action = OperatorAction.objects.first()
    for method in (auditor.post, auditor.put, auditor.patch, auditor.delete):
        assert method(trail_url()).status_code == 405
        assert method(export_url()).status_code == 405
    for path in (f"/audit/{action.id}/", f"/audit/{action.id}/edit/", f"/audit/{action.id}/delete/"):
        with pytest.raises(Resolver404):
            resolve(path)
    assert operator_actions().count() == 3


# The list


def test_the_trail_shows_every_action_newest_first_with_who_what_and_why(auditor, trail):
    response = auditor.get(trail_url())
    html = response.content.decode()
    assert response.status_code == 200 and shown(html) == 3
    assert html.index("resolve_operation") < html.index("payments is back") < html.index("duplicate order")
    cancelled = trail["cancelled"]
    assert reverse("durable:run-detail", args=[cancelled.id]) in html
    assert "PENDING → CANCELLED" in html and "FAILED → PENDING" in html and "UNKNOWN → SUCCEEDED" in html
    assert reverse("reconciliation:operation", args=[OPERATION]) in html
    assert "&quot;external_ref&quot;: &quot;ntf-1&quot;" in strip_tags(html)  # the detail, as JSON
    assert ">alice<" in html and ">bob<" in html and ">console<" in html and ">api<" in html


@pytest.mark.parametrize("query,expected", [
    ({"actor": "alice"}, ["duplicate order"]),
    ({"action": "retry"}, ["payments is back"]),
    ({"source": "console"}, ["seen in the outbox", "duplicate order"]),
    ({"operation_id": OPERATION}, ["seen in the outbox"]),
])
def test_the_trail_is_filtered(auditor, trail, query, expected):
    html = auditor.get(trail_url(**query)).content.decode()
    assert shown(html) == len(expected)
    assert all(reason in html for reason in expected)


def test_the_trail_is_filtered_by_run(auditor, trail):
    html = auditor.get(trail_url(run=trail["retried"].id)).content.decode()
    assert shown(html) == 2 and "duplicate order" not in html


def test_with_htmx_the_filter_answers_with_the_rows_and_an_export_link_that_keeps_the_filters(auditor, trail):
    response = auditor.get(trail_url(actor="alice"), **HTMX)
    html = response.content.decode()
    assert "<html" not in html and shown(html) == 1
    assert f'href="{export_url(actor="alice")}"' in html and 'hx-swap-oob="true"' in html
    assert "HX-Request" in response["Vary"]


def test_the_page_offers_the_export_of_what_it_shows(auditor, trail):
    html = auditor.get(trail_url(actor="alice")).content.decode()
    assert f'href="{export_url(actor="alice")}"' in html


def test_a_date_range_keeps_the_actions_of_those_days(auditor, trail, monkeypatch):
    now = timezone.now()
    with monkeypatch.context() as past:  # the trail is append-only: an old action is written in the past
        past.setattr(timezone, "now", lambda: now - timedelta(days=10))
        audit(user=None, action="expire", run=trail["cancelled"], source="command", status_before="PENDING",
                       status_after="FAILED", reason="ten days ago")
    today = timezone.localdate()
    html = auditor.get(trail_url(since=today - timedelta(days=1), until=today)).content.decode()
    assert shown(html) == 3 and "ten days ago" not in html
    html = auditor.get(trail_url(until=today - timedelta(days=5))).content.decode()
    assert shown(html) == 1 and "ten days ago" in html


@pytest.mark.parametrize("query,error", [
    ({"since": "2024-13-45"}, "From: Enter a valid date."),
    ({"since": "2024-05-02", "until": "2024-05-01"}, "&#x27;From&#x27; is after &#x27;To&#x27;"),
    ({"run": "not-a-run"}, "Run: Enter a valid UUID."),
    ({"after": "garbage"}, "not a page of this trail"),
])
def test_a_bad_filter_shows_its_error_and_no_actions(auditor, trail, query, error):
    response = auditor.get(trail_url(**query))
    html = response.content.decode()
    assert response.status_code == 400
    assert error in html and shown(html) == 0


# Paging


@pytest.fixture
def many_actions(monkeypatch):
    """205 actions written in the same instant, so only the id orders them within it."""
    actor, run, now = make_user("carol"), new_run(), timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    OperatorAction.objects.bulk_create(
        OperatorAction(actor=actor, actor_username="carol", action="cancel", run=run, source="console",
                       reason=f"r{i:03}") for i in range(205))
    monkeypatch.undo()
    assert operator_actions().filter(created_at=now).count() == 205
    return list(operator_actions().order_by("-id").values_list("reason", flat=True))


def test_the_trail_is_paged_by_100_with_a_next_page_link_that_keeps_the_filters(auditor, many_actions):
    pages, url = [], trail_url(actor="carol")
    while url:
        html = auditor.get(url, **HTMX).content.decode()
        pages.append(re.findall(r"<td>(r\d{3})</td>", html))
        more = re.search(r'<tr class="more"><td colspan="8"><a href="([^"]+)"', html)
        url = more.group(1).replace("&amp;", "&") if more else ""
        assert not url or "actor=carol" in url
    assert [len(page) for page in pages] == [100, 100, 5]
    assert [reason for page in pages for reason in page] == many_actions  # newest first, each once, no gap at the page boundaries


def test_the_first_page_holds_100_actions(auditor, many_actions):
    html = auditor.get(trail_url()).content.decode()
    assert shown(html) == 100 and 'class="more"' in html


# Export


def test_the_export_is_a_csv_attachment_with_a_header_row_and_every_action(auditor, trail):
    response = auditor.get(export_url())
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-trail-')
    lines = exported(response)
    assert lines[0] == HEADER and len(lines) == 4
    resolution = dict(zip(HEADER, lines[1], strict=True))
    assert resolution["actor"] == "bob" and resolution["action"] == "resolve_operation"
    assert resolution["run"] == str(trail["retried"].id) and resolution["operation_id"] == OPERATION
    assert (resolution["status_before"], resolution["status_after"], resolution["source"]) == (
        "UNKNOWN", "SUCCEEDED", "console")
    assert resolution["detail"] == '{"external_ref": "ntf-1", "outcome": "succeeded"}'
    assert resolution["when"] == operator_actions().get(action="resolve_operation").created_at.isoformat()


def test_a_reason_that_looks_like_a_formula_is_exported_as_text(auditor, trail):
    lines = exported(auditor.get(export_url(action="resolve_operation")))
    assert dict(zip(HEADER, lines[1], strict=True))["reason"] == "'=seen in the outbox"


def test_every_field_is_quoted_and_a_formula_after_a_separator_is_inert(auditor, trail):
    OperatorAction.objects.create(action="cancel", run=trail["retried"], source="console", reason="x;=1+1")
    body = b"".join(auditor.get(export_url(action="cancel")).streaming_content).decode()
    rows = body.splitlines()
    assert all(row.startswith('"') and row.endswith('"') for row in rows)
    assert '"x;\'=1+1"' in body


def test_the_export_honours_the_filters(auditor, trail):
    lines = exported(auditor.get(export_url(actor="alice")))
    assert len(lines) == 2 and dict(zip(HEADER, lines[1], strict=True))["reason"] == "duplicate order"
    lines = exported(auditor.get(export_url(run=trail["retried"].id, source="api")))
    assert [dict(zip(HEADER, line, strict=True))["action"] for line in lines[1:]] == ["retry"]


def test_the_export_holds_every_matching_action_not_one_page(auditor, many_actions):
    assert len(exported(auditor.get(export_url(after="2024-01-01T00:00:00+00:00~1")))) == 206


def test_a_bad_filter_exports_nothing_and_says_why(auditor, trail):
    response = auditor.get(export_url(since="yesterday"))
    assert response.status_code == 400
    assert "Enter a valid date" in response.content.decode()
