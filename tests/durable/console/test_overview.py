"""The console's overview: runs by status, what waits for people, blocked runs, recent failures."""
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from durable.engine.states import TERMINAL, RunStatus
from durable.models import Run
from tests.approvals.flow import waiting_claim
from tests.conftest import make_user
from tests.durable.claims import needs_attention
from tests.durable.console.screens import (
    HTMX,
    VIEW,
    client_for,
    detail_url,
    run_in,
    runs_url,
)

pytestmark = pytest.mark.django_db
APPROVALS = "approvals.view_approvalrequest"


def overview_url():
    return reverse("durable:overview")


def status_row(status, count):
    return (f'<tr><td><a href="{runs_url()}?status={status}"><span class="status status-{status.lower()}">{status}</span>'
            f'</a></td><td class="count">{count}</td></tr>')


def test_the_overview_counts_runs_in_flight_and_those_finished_in_the_last_day(viewer):
    for status in (RunStatus.FAILED, RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.WAITING_RETRY):
        run_in(status)
    long_ago = run_in(RunStatus.SUCCEEDED)
    Run.objects.filter(id=long_ago.id).update(updated_at=timezone.now() - timedelta(days=2))
    with CaptureQueriesContext(connection) as queries:
        response = viewer.get(overview_url())
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    found = response.context["overview"]
    assert dict(found.in_flight) == {s: int(s == "WAITING_RETRY") for s in RunStatus if s not in TERMINAL}
    assert dict(found.finished_recently) == {"SUCCEEDED": 1, "FAILED": 2, "CANCELLED": 0}  # not the one of 2 days ago
    for status, count in (("FAILED", 2), ("SUCCEEDED", 1), ("WAITING_RETRY", 1), ("PENDING", 0)):
        assert status_row(status, count) in html
    assert len([q for q in queries.captured_queries if "GROUP BY" in q["sql"]]) == 2


def test_an_unknown_operation_raises_an_alert_that_links_to_reconciliation(demo, viewer):
    needs_attention(demo)
    html = viewer.get(overview_url()).content.decode()
    alert = re.search(r'<p class="alert" role="alert">(.*?)</p>', html, re.DOTALL).group(1)
    assert "1 operation UNKNOWN." in alert and '<a href="/reconciliation/">Resolve it in reconciliation</a>' in alert
    assert status_row("NEEDS_ATTENTION", 1) in html


def test_without_unknown_operations_there_is_no_alert(viewer):
    run_in(RunStatus.FAILED)
    html = viewer.get(overview_url()).content.decode()
    assert 'role="alert"' not in html and "<dt>UNKNOWN operations</dt>\n        <dd>none</dd>" in html


def test_pending_approvals_are_counted_and_link_to_the_inbox_for_who_may_see_it(demo, viewer):
    waiting_claim("ORD-1001")
    html = client_for(make_user("lead", VIEW, APPROVALS)).get(overview_url()).content.decode()
    assert f'<a href="{reverse("approvals:inbox")}" class="pending-approvals">1 pending</a>' in html
    html = viewer.get(overview_url()).content.decode()
    assert "1 pending" in html and 'class="pending-approvals"' not in html


def test_blocked_runs_are_counted_with_the_newest_and_their_reason(viewer):
    older = run_in(RunStatus.BLOCKED_VERSION, business_key="ORD-old", error={"kind": "version_missing",
                                                                             "message": "this worker has no v1"})
    run_in(RunStatus.BLOCKED_VERSION, business_key="ORD-new", error={"kind": "release_changed",
                                                                     "message": "prompt release changed"})
    Run.objects.filter(id=older.id).update(updated_at=timezone.now() - timedelta(hours=1))
    html = viewer.get(overview_url()).content.decode()
    assert f'<a href="{runs_url()}?status=BLOCKED_VERSION" class="blocked-runs">2 runs</a>' in html
    assert html.index("ORD-new</a>: prompt release changed") < html.index("ORD-old</a>: this worker has no v1")
    assert detail_url(older) in html


def test_recent_failures_show_the_ten_newest_with_their_error(viewer):
    failed = [run_in(RunStatus.FAILED, business_key=f"F-{n}", current_step="payment",
                     error={"kind": "invalid_request", "message": f"amount {n} refused"}) for n in range(12)]
    for n, run in enumerate(failed):
        Run.objects.filter(id=run.id).update(updated_at=timezone.now() - timedelta(minutes=60 - n))
    response = viewer.get(overview_url())
    assert [r.business_key for r in response.context["overview"].failures] == [f"F-{n}" for n in range(11, 1, -1)]
    html = response.content.decode()
    assert "<strong>invalid_request</strong>: amount 11 refused" in html and "amount 1 refused" not in html


def test_without_failures_the_overview_says_so(viewer):
    assert "No run has failed." in viewer.get(overview_url()).content.decode()


def test_the_overview_is_a_live_region_polling_its_fragment(viewer):
    run_in(RunStatus.FAILED, business_key="ORD-9")
    page = viewer.get(overview_url()).content.decode()
    poller = f'<div id="overview" class="overview" data-live hx-get="{overview_url()}" hx-trigger="every 5s" hx-swap="outerHTML"'
    assert poller in page
    fragment = viewer.get(overview_url(), **HTMX)
    html = fragment.content.decode()
    assert fragment.status_code == 200 and html.startswith(poller)  # the fragment polls on after its swap
    assert "<html" not in html and "ORD-9" in html and "HX-Request" in fragment["Vary"]
    unchanged = viewer.get(overview_url(), HTTP_IF_NONE_MATCH=fragment["ETag"], **HTMX)
    assert unchanged.status_code == 304 and unchanged.content == b""


def test_the_fragment_updates_the_navigation_badge_for_who_sees_approvals(demo):
    waiting_claim()
    html = client_for(make_user("lead", VIEW, APPROVALS)).get(overview_url(), **HTMX).content.decode()
    assert re.search(r'<span id="approvals-badge" class="badge"[^>]*hx-swap-oob="true">1</span>', html)


def test_the_overview_is_first_in_the_navigation_and_where_login_lands(viewer):
    html = viewer.get(runs_url()).content.decode()
    assert f'<a class="brand" href="{overview_url()}">durable</a>' in html
    assert re.search(rf'<nav>\s*<a href="{overview_url()}">Overview</a>\s*<a href="{runs_url()}">Runs</a>', html)
    assert reverse(settings.LOGIN_REDIRECT_URL) == overview_url()


def test_the_overview_shows_what_the_alerts_watch_and_links_to_the_metrics(demo, viewer):
    from approvals.models import ApprovalRequest
    from durable import metrics
    from durable.console.selectors import COUNTED

    before = metrics.totals(COUNTED.values())
    metrics.operation_unknown("notify")
    metrics.retries_exhausted("claims-agent", 2)
    metrics.retries_exhausted("claims-agent", 2)
    metrics.run_blocked("claims-agent", 1, "version_missing")
    _, old = waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")  # asked a moment ago: not stuck
    ApprovalRequest.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(hours=25))
    response = viewer.get(overview_url())
    alerting = response.context["overview"].alerting
    assert (alerting.unknown_operations, alerting.retries_exhausted, alerting.version_mismatches) == (
        before["side_effect_unknown_total"] + 1, before["retry_exhausted_total"] + 2,
        before["workflow_version_mismatch_total"] + 1)
    assert alerting.stuck_approvals == 1
    html = response.content.decode()
    assert f'<dd class="retries-exhausted">{alerting.retries_exhausted}</dd>' in html
    assert '<dd class="stuck-approvals">1</dd>' in html  # the viewer may not open the inbox: no link
    assert f'<a href="{reverse("metrics")}" class="metrics-link">Prometheus metrics</a>' in html


def test_an_approval_about_to_expire_is_stuck(demo):
    from approvals.models import ApprovalRequest
    from durable.console.selectors import alerting

    _, request = waiting_claim()
    assert alerting().stuck_approvals == 0
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() + timedelta(minutes=30))
    assert alerting().stuck_approvals == 1
