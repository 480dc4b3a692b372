"""The approvals console: the inbox, one request beside its current facts, and deciding it (htmx and plain)."""
import re
from datetime import UTC, timedelta

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals import views
from approvals.models import ApprovalDecision, ApprovalRequest
from tests.approvals.flow import decide, waiting_claim
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db

VIEW, DECIDE = "approvals.view_approvalrequest", "approvals.decide_approvalrequest"
HTMX = {"HTTP_HX_REQUEST": "true"}


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", VIEW, "durable.view_run"))


@pytest.fixture
def approver():
    return client_for(make_user("approver", VIEW, DECIDE))


def inbox_url():
    return reverse("approvals:inbox")


def detail_url(request):
    return reverse("approvals:detail", args=[request.id])


def decide_url(request):
    return reverse("approvals:decide", args=[request.id])


def approve(client, request, **extra):
    return client.post(decide_url(request), {"verdict": "approve", "snapshot_hash": request.snapshot_hash}, **extra)


def reject(client, request, reason="", **extra):
    return client.post(decide_url(request), {"verdict": "reject", "reason": reason,
                                             "snapshot_hash": request.snapshot_hash}, **extra)


def expiring_in(request, delta):
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() + delta)
    request.refresh_from_db()
    return request


def changed_row(key, then, now):
    return f'<tr class="changed"><td>{key}</td><td>{then}</td><td>{now}</td></tr>'


def nothing_written(request):
    request.refresh_from_db()
    return request.status == "PENDING" and not ApprovalDecision.objects.exists() and not operator_actions().exists()


# Who may look


def test_the_inbox_lives_under_approvals():
    assert inbox_url() == "/approvals/"


def test_anonymous_visitors_are_sent_to_the_login_page(demo):
    _, request = waiting_claim()
    for url in (inbox_url(), detail_url(request)):
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"] == f"{reverse('durable:login')}?next={url}"
    response = Client().post(decide_url(request), {"verdict": "approve", "snapshot_hash": request.snapshot_hash})
    assert response.status_code == 302 and response["Location"].startswith(reverse("durable:login"))
    assert nothing_written(request)


def test_a_user_without_the_view_permission_is_forbidden(demo):
    _, request = waiting_claim()
    outsider = client_for(make_user("outsider", "durable.view_run"))
    assert outsider.get(inbox_url()).status_code == 403
    assert outsider.get(detail_url(request)).status_code == 403


def test_an_unknown_request_is_a_404(viewer):
    assert viewer.get("/approvals/00000000-0000-0000-0000-000000000000/").status_code == 404


# The inbox


def test_the_inbox_lists_pending_requests_soonest_expiry_first_with_a_live_countdown(demo, viewer):
    _, later = waiting_claim("ORD-1001")
    sooner = expiring_in(waiting_claim("ORD-1003")[1], timedelta(hours=1))
    response = viewer.get(inbox_url())
    assert response.status_code == 200
    assert [r.id for r in response.context["approvals"]] == [sooner.id, later.id]
    html = response.content.decode()
    assert html.index(detail_url(sooner)) < html.index(detail_url(later))
    assert "claims-agent v2" in html and "refund <strong>35.50 EUR</strong> → ORD-1003" in html
    assert "<td>0 / 1</td>" in html
    iso = sooner.expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f'data-expires-at="{iso}"' in html


def test_decided_requests_leave_the_inbox(demo, viewer):
    _, decided = waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")
    decide(decided, make_user("ann", DECIDE))
    html = viewer.get(inbox_url()).content.decode()
    assert "ORD-1003" in html and "ORD-1001" not in html


def test_the_inbox_shows_approvals_so_far_against_those_required(demo, viewer):
    _, request = waiting_claim("ORD-1002")  # over the two-approver threshold
    decide(request, make_user("ann", DECIDE))
    assert "<td>1 / 2</td>" in viewer.get(inbox_url()).content.decode()


def test_filters_narrow_the_inbox(demo, viewer):
    waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")
    for query, shown in [({"business_key": "ORD-1001"}, ["ORD-1001"]),
                         ({"kind": "refund", "workflow": "claims-agent", "version": 2}, ["ORD-1001", "ORD-1003"]),
                         ({"kind": "payout"}, []),
                         ({"workflow": "claims-agent", "version": 1}, [])]:
        response = viewer.get(inbox_url(), query)
        assert sorted(r.business_key for r in response.context["approvals"]) == shown, query
    html = viewer.get(inbox_url(), {"kind": "payout"}).content.decode()
    assert "No approvals are waiting that match these filters." in html


def test_a_bad_filter_is_named_on_the_page_and_shows_no_requests(demo, viewer):
    waiting_claim()
    response = viewer.get(inbox_url(), {"version": "abc"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Version: Enter a whole number." in html
    assert list(response.context["approvals"]) == [] and "ORD-1001" not in html


def test_an_htmx_inbox_request_gets_only_its_live_region(demo, viewer):
    waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")
    response = viewer.get(inbox_url(), {"business_key": "ORD-1003"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "<form" not in html and html.lstrip().startswith('<div id="inbox-live"')
    assert "ORD-1003" in html and "ORD-1001" not in html
    assert "HX-Request" in response["Vary"]  # a cache keeps the rows and the page apart


def test_the_inbox_filter_form_updates_the_live_region_and_the_address(demo, viewer):
    html = viewer.get(inbox_url()).content.decode()
    form = re.search(r"<form[^>]*class=\"filters\"[^>]*>", html).group(0)
    assert f'hx-get="{inbox_url()}"' in form and 'hx-target="#inbox-live"' in form and 'hx-push-url="true"' in form


def test_the_inbox_pages_by_expiry_and_keeps_the_filters(demo, viewer, monkeypatch):
    monkeypatch.setattr(views, "PAGE", 1)
    first = expiring_in(waiting_claim("ORD-1003")[1], timedelta(hours=1))
    _, second = waiting_claim("ORD-1001")
    page = viewer.get(inbox_url(), {"kind": "refund"})
    assert [r.id for r in page.context["approvals"]] == [first.id]
    next_page = page.context["next_page"]
    assert "kind=refund" in next_page and "after=" in next_page
    assert next_page in page.content.decode().replace("&amp;", "&")
    following = viewer.get(next_page, **HTMX)
    assert [r.id for r in following.context["approvals"]] == [second.id] and following.context["next_page"] == ""


def test_a_tampered_page_marker_is_named_on_the_page(viewer):
    html = viewer.get(inbox_url(), {"after": "yesterday"}).content.decode()
    assert "Page: not a page of this inbox" in html


# The navigation badge


def test_the_navigation_shows_the_pending_count_to_those_who_may_see_approvals(demo, viewer):
    waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")
    html = viewer.get(reverse("durable:runs")).content.decode()
    assert f'<a href="{inbox_url()}">Approvals' in html
    assert re.search(r'<span id="approvals-badge" class="badge"[^>]*>2</span>', html)
    runs_only = client_for(make_user("runs-only", "durable.view_run")).get(reverse("durable:runs")).content.decode()
    assert "approvals-badge" not in runs_only and inbox_url() not in runs_only


def test_a_live_fragment_counts_pending_approvals_once_for_its_version_and_its_badge(demo, viewer):
    waiting_claim()
    with CaptureQueriesContext(connection) as queries:
        html = viewer.get(inbox_url(), **HTMX).content.decode()
    counts = [q for q in queries.captured_queries if 'AS "__count" FROM "approvals_approvalrequest"' in q["sql"]]
    assert len(counts) == 1
    assert '<span id="approvals-badge" class="badge" title="pending approvals" hx-swap-oob="true">1</span>' in html


def test_pages_load_only_script_files_the_project_ships(viewer):
    html = viewer.get(inbox_url()).content.decode()
    scripts = re.findall(r"<script[^>]*>", html)
    sources = [re.search(r'src="/static/([^"]+)"', tag).group(1) for tag in scripts]  # no inline scripts
    assert {"django_htmx/htmx-2.min.js", "durable/countdown.js", "durable/answer-panels.js"} <= set(sources)
    assert all(finders.find(source) for source in sources), sources


# One request


def test_the_request_page_shows_the_snapshot_beside_the_current_values_with_the_change_highlighted(demo, viewer):
    run, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})
    response = viewer.get(detail_url(request))
    assert response.status_code == 200
    html = response.content.decode()
    assert changed_row("amount", "120.00", "150.00") in html
    assert "<tr><td>customer</td><td>Ada Lovelace</td><td>Ada Lovelace</td></tr>" in html
    assert "The order amount changed from 120.00 to 150.00" in html
    assert ApprovalRequest.objects.get(id=request.id).status == "PENDING"  # looking decides nothing


def test_the_request_page_says_what_is_approved_and_where_it_comes_from(demo, viewer):
    run, request = waiting_claim()
    html = viewer.get(detail_url(request)).content.decode()
    assert request.snapshot_hash in html and request.object_hash in html
    assert "<dt>amount</dt><dd>120.00</dd>" in html and "<dt>target</dt><dd>ORD-1001</dd>" in html
    assert "claims-agent v2" in html and "approval (ask #1)" in html and "0 of 1 required" in html
    assert "I would like a refund please." in html
    assert reverse("durable:run-detail", args=[run.id]) in html
    assert "data-expires-at=" in html and "No decisions yet." in html


def test_the_request_page_says_so_when_the_facts_cannot_be_read_now(demo, viewer):
    _, request = waiting_claim()
    demo.state.arm_fault("orders", "503")
    html = viewer.get(detail_url(request)).content.decode()
    assert "Could not re-read the facts behind this request" in html
    assert "<th>Now</th>" not in html and "<td>amount</td><td>120.00</td>" in html


def test_a_replaced_request_links_to_the_newer_ask(demo, approver):
    run, first = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})
    assert approve(approver, first).status_code == 409  # invalidated; the run asks again
    advance(run)
    second = ApprovalRequest.objects.get(run=run, ask=2)
    html = approver.get(detail_url(first)).content.decode()
    assert f'<a href="{detail_url(second)}">ask #2 (PENDING)</a>' in html


def test_an_approver_sees_the_decision_form_bound_to_the_snapshot_shown(demo, approver):
    _, request = waiting_claim()
    html = approver.get(detail_url(request)).content.decode()
    assert f'hx-post="{decide_url(request)}"' in html and 'hx-target="#approval-live"' in html
    assert f'name="snapshot_hash" value="{request.snapshot_hash}"' in html
    assert 'name="verdict" value="approve"' in html and 'name="verdict" value="reject"' in html


# Deciding


def test_approving_through_the_console_swaps_in_the_decided_panel(demo, approver):
    _, request = waiting_claim()
    response = approve(approver, request, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="approval-live"') and "<html" not in html
    assert "APPROVED" in html and "Approved. The run continues" in html and "<form" not in html
    assert re.search(r'<span id="approvals-badge" class="badge badge-empty"[^>]*hx-swap-oob="true">0</span>', html)
    request.refresh_from_db()
    assert request.status == "APPROVED" and request.decided_by.username == "approver"
    action = operator_actions().get()
    assert (action.action, action.source, action.actor.username) == ("approve", "console", "approver")


def test_approving_without_htmx_redirects_to_the_request_with_a_message(demo, approver):
    _, request = waiting_claim()
    response = approve(approver, request)
    assert response.status_code == 302 and response["Location"] == detail_url(request)
    html = approver.get(response["Location"]).content.decode()
    assert "Approved. The run continues" in html
    assert ApprovalRequest.objects.get(id=request.id).status == "APPROVED"


def test_one_approval_of_two_keeps_the_request_open(demo, approver):
    _, request = waiting_claim("ORD-1002")
    response = approve(approver, request, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Your approval is recorded (1 of 2); it still needs another approver." in html
    assert "1 of 2 required" in html and "<td>approver</td><td>approve</td>" in html
    assert ApprovalRequest.objects.get(id=request.id).status == "PENDING"


def test_rejecting_with_a_reason_closes_the_request(demo, approver):
    _, request = waiting_claim()
    response = reject(approver, request, reason="customer already got a voucher", **HTMX)
    assert response.status_code == 200
    assert "Rejected. The run stops without acting." in response.content.decode()
    request.refresh_from_db()
    assert request.status == "REJECTED" and request.reason == "customer already got a voucher"
    assert operator_actions().get().source == "console"


def test_a_rejection_without_a_reason_is_a_400_naming_the_field_and_writes_nothing(demo, approver):
    _, request = waiting_claim()
    response = reject(approver, request, reason="  ", **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="approval-live"')
    assert '<p class="error field-error">A rejection needs a reason.</p>' in html
    assert "<form" in html  # the approver fixes it in place
    assert nothing_written(request)


def test_without_htmx_a_refusal_renders_the_page_with_its_status(demo, approver):
    _, request = waiting_claim()
    response = reject(approver, request)
    assert response.status_code == 400
    html = response.content.decode()
    assert "<html" in html and "A rejection needs a reason." in html
    assert nothing_written(request)


def test_an_incomplete_decision_is_a_400(demo, approver):
    _, request = waiting_claim()
    response = approver.post(decide_url(request), {"snapshot_hash": request.snapshot_hash}, **HTMX)
    assert response.status_code == 400 and "Decision: This field is required." in response.content.decode()
    assert nothing_written(request)


def test_a_stale_snapshot_hash_is_a_409_panel(demo, approver):
    _, request = waiting_claim()
    response = approver.post(decide_url(request), {"verdict": "approve", "snapshot_hash": "0" * 64}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="approval-live"')
    assert "You decided on a snapshot that is not this request&#x27;s" in html
    assert "<form" not in html and "Reload this request" in html  # look again before deciding
    assert nothing_written(request)


def test_facts_changed_is_a_409_panel_with_the_current_values_and_the_request_invalidated(demo, approver):
    _, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})
    response = approve(approver, request, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "The facts changed since the request was made" in html and "INVALIDATED" in html
    # The values now, beside the snapshot, in the one facts table (never a second copy in the panel).
    assert html.count('<table class="facts">') == 1 and changed_row("refunded_amount", "0.00", "120.00") in html
    request.refresh_from_db()
    assert request.status == "INVALIDATED" and not ApprovalDecision.objects.exists()
    assert list(operator_actions().values_list("action", "source")) == [("invalidate_approval", "console")]


def test_facts_that_cannot_be_read_at_decision_time_are_a_503_panel_that_lets_the_approver_try_again(demo, approver):
    _, request = waiting_claim()
    demo.state.arm_fault("orders", "503")
    response = approve(approver, request, **HTMX)
    assert response.status_code == 503
    html = response.content.decode()
    assert "Could not re-read the facts behind this request" in html and "nothing was decided, try again" in html
    assert f'hx-post="{decide_url(request)}"' in html
    assert nothing_written(request)


def test_a_viewer_without_the_decide_permission_sees_no_form_and_cannot_post(demo, viewer):
    _, request = waiting_claim()
    html = viewer.get(detail_url(request)).content.decode()
    assert 'id="decision"' in html and decide_url(request) not in html
    assert approve(viewer, request, **HTMX).status_code == 403
    assert nothing_written(request)


def test_the_runs_starter_cannot_approve_it_and_is_told_why(demo):
    starter = make_user("starter", VIEW, DECIDE)
    _, request = waiting_claim(starter=starter)
    response = approve(client_for(starter), request, **HTMX)
    assert response.status_code == 403
    assert "You started this run, so you cannot decide its approval" in response.content.decode()
    assert nothing_written(request)


def test_a_decided_request_shows_no_form_and_who_decided(demo, approver):
    _, request = waiting_claim()
    decide(request, make_user("ann", DECIDE), verdict="reject", reason="duplicate claim")
    html = approver.get(detail_url(request)).content.decode()
    assert "<form method=\"post\" action=\"" + decide_url(request) not in html
    assert "by ann" in html and "duplicate claim" in html and "at the last check" in html


# The run's page


def test_the_run_page_lists_its_approval_requests(demo, viewer):
    run, request = waiting_claim()
    html = viewer.get(reverse("durable:run-detail", args=[run.id])).content.decode()
    assert "<h2>Approvals</h2>" in html
    assert f'<a href="{detail_url(request)}">refund</a>' in html and "#1" in html and "PENDING" in html


# A child run's request: the inbox and the request name the parent run


@pytest.mark.django_db(transaction=True)
def test_a_child_runs_request_names_its_parent_run_in_the_inbox_and_on_its_page(demo, viewer):
    from tests.approvals.supervisor import supervised_claim

    parent, child = supervised_claim("ORD-1001", case="CASE-77")
    waiting_claim("ORD-1003")  # a run nobody started as a child: no parent to name
    request = ApprovalRequest.objects.get(run=child)
    parent_link = f'<a href="{reverse("durable:run-detail", args=[parent.id])}">test-claims-supervisor v1 · CASE-77</a>'
    rows = viewer.get(inbox_url()).content.decode().split('<tr class="approval-row">')[1:]
    [child_row] = [row for row in rows if "ORD-1001" in row]
    assert f'<small class="parent-run">child of {parent_link}</small>' in child_row
    assert [row for row in rows if "parent-run" in row] == [child_row]
    page = viewer.get(detail_url(request)).content.decode()
    assert (f'<dt>Parent run</dt><dd class="parent-run">this run is a child of {parent_link} '
            '<span class="status status-waiting">WAITING</span></dd>') in page


@pytest.mark.django_db(transaction=True)
def test_the_inbox_reads_the_parent_runs_of_a_page_in_one_query(demo, viewer):
    from tests.approvals.supervisor import supervised_claim

    def reads_of_runs() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert viewer.get(inbox_url()).status_code == 200
        return len([q for q in queries.captured_queries if 'FROM "durable_run"' in q["sql"]])

    supervised_claim("ORD-1001", case="CASE-1")
    viewer.get(inbox_url())  # the session's first page also keeps the operator's time zone
    one = reads_of_runs()
    supervised_claim("ORD-1003", case="CASE-3")
    waiting_claim("ORD-1002")
    assert reads_of_runs() == one
