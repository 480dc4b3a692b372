"""The console's overview: now (runs in flight, what waits for people) apart from the last 24 hours, from the database."""
import re
from datetime import timedelta

import pytest
from django.conf import settings
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


def ended(status, *, hours_ago: float = 0, **fields):
    """A run that ended `hours_ago` hours ago, as the executor leaves it (finished_at set)."""
    when = timezone.now() - timedelta(hours=hours_ago)
    return run_in(status, finished_at=when, updated_at=when, **fields)


def test_now_counts_runs_in_flight_and_the_last_day_counts_runs_that_ended_in_it(viewer):
    for status in (RunStatus.FAILED, RunStatus.FAILED, RunStatus.SUCCEEDED):
        ended(status)
    run_in(RunStatus.WAITING_RETRY)
    old = ended(RunStatus.SUCCEEDED, hours_ago=30)  # started and ended before the window
    Run.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(hours=31))
    response = viewer.get(overview_url())
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    found = response.context["overview"]
    assert dict(found.now.in_flight) == {s: int(s == "WAITING_RETRY") for s in RunStatus if s not in TERMINAL}
    day = found.last_day
    assert (day.started.total, day.finished.total, day.failed.total) == (4, 3, 2)  # not the one of 30 hours ago
    assert day.finished.hours[-1] == 3 and len(day.finished.hours) == 24
    for status, count in (("WAITING_RETRY", 1), ("PENDING", 0)):
        assert status_row(status, count) in html
    assert "SUCCEEDED" not in re.search(r'<section class="panel overview-now">.*?</section>', html, re.S).group(0)


def test_the_overview_reads_the_database_and_no_process_counter(viewer, monkeypatch):
    from durable import metrics

    monkeypatch.setattr(metrics, "totals", lambda *a, **k: pytest.fail("the overview read a process counter"))
    ended(RunStatus.FAILED)
    assert viewer.get(overview_url()).status_code == 200


def test_each_number_agrees_with_the_runs_list_it_links_to(viewer):
    for status in (RunStatus.WAITING_RETRY, RunStatus.WAITING_RETRY, RunStatus.BLOCKED_VERSION, RunStatus.RUNNING):
        run_in(status)
    for status in (RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.FAILED):
        ended(status)
    old = ended(RunStatus.FAILED, hours_ago=30)
    Run.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(hours=31))
    html = viewer.get(overview_url()).content.decode()
    found = viewer.get(overview_url()).context["overview"]
    for status, count in found.now.in_flight:
        assert listed_runs(viewer, f"{runs_url()}?status={status}") == count, status
    day = found.last_day
    for row, number in (("started", day.started.total), ("finished", day.finished.total), ("failed", day.failed.total)):
        link = re.search(rf'<tr class="last-day-{row}"><th>[^<]+</th><td class="count"><a href="([^"]+)">(\d+)</a>',
                         html)
        assert int(link.group(2)) == number, row
        assert listed_runs(viewer, link.group(1).replace("&amp;", "&")) == number, row
    assert (day.started.total, day.finished.total, day.failed.total) == (8, 4, 2)


def listed_runs(client, url: str) -> int:
    return client.get(url).content.decode().count('<tr class="run-row">')


def test_approvals_decided_in_the_last_day_are_counted_with_their_median_wait(demo):
    from approvals.models import ApprovalRequest
    from tests.approvals.flow import decide

    lead = make_user("lead", VIEW, APPROVALS, "approvals.decide_approvalrequest")
    for order_id, minutes in (("ORD-1001", 10), ("ORD-1002", 50)):
        _, request = waiting_claim(order_id)
        ApprovalRequest.objects.filter(id=request.id).update(created_at=timezone.now() - timedelta(minutes=minutes))
        request.refresh_from_db()
        decide(request, lead, verdict="reject", reason="not covered")
    _, pending = waiting_claim("ORD-1003")
    ApprovalRequest.objects.filter(id=pending.id).update(created_at=timezone.now() - timedelta(hours=3))
    response = client_for(lead).get(overview_url())
    [approvals] = [shown.data for shown in response.context["overview"].sections]  # approvals/overview.py
    assert approvals.decided.total == 2 and round(approvals.median_wait.total_seconds() / 60) == 30
    assert approvals.pending == 1 and approvals.oldest.id == pending.id
    html = response.content.decode()
    assert '<small class="median-wait">median wait 30 min</small>' in html
    assert re.search(rf'<dd class="oldest-approval"><a href="{reverse("approvals:detail", args=[pending.id])}">'
                     r'refund for ORD-1003</a>, waiting 3 h( \d+ min)?</dd>', html)


def test_a_prevented_duplicate_is_counted_and_an_operation_resolved_by_hand_is_not(demo):
    from reconciliation.services import resolve_operation
    from tests.durable.claims import advance, needs_attention

    run, row = needs_attention(demo)
    resolver = make_user("resolver", VIEW, "durable.resolve_sideeffect", "durable.view_sideeffect")
    resolve_operation(operation_id=row.operation_id, user=resolver, source="test", outcome="succeeded",
                      external_ref="ntf-1", reason="seen in the provider's outbox")
    assert advance(run).status == RunStatus.SUCCEEDED
    client = client_for(make_user("watcher", VIEW))
    assert client.get(overview_url()).context["overview"].last_day.duplicates_prevented.total == 0
    # A real one: the run's step entered again after its refund had succeeded (a crash before the checkpoint).
    from durable.models import JournalEntry

    JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.DUPLICATE_PREVENTED, step="refund", name="refund",
                                created_at=timezone.now())
    assert client.get(overview_url()).context["overview"].last_day.duplicates_prevented.total == 1


def test_the_hourly_charts_are_inline_svg_with_a_bar_per_busy_hour(viewer):
    ended(RunStatus.FAILED)
    ended(RunStatus.FAILED, hours_ago=2)
    html = viewer.get(overview_url()).content.decode()
    failed = re.search(r'<tr class="last-day-failed">.*?</tr>', html, re.S).group(0)
    assert '<svg class="hourly-chart"' in failed and 'aria-label="failed per hour, at most 1 in an hour"' in failed
    assert failed.count("<rect ") == 2 and "<script" not in failed


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
        Run.objects.filter(id=run.id).update(finished_at=timezone.now() - timedelta(minutes=60 - n))
    response = viewer.get(overview_url())
    assert [r.business_key for r in response.context["overview"].now.failures] == [f"F-{n}" for n in range(11, 1, -1)]
    html = response.content.decode()
    assert "<strong>invalid_request</strong>: amount 11 refused" in html and "amount 1 refused" not in html


def test_without_failures_the_overview_says_so(viewer):
    assert "No run has failed." in viewer.get(overview_url()).content.decode()


def test_the_overview_is_a_live_region_polling_its_fragment(viewer):
    ended(RunStatus.FAILED, business_key="ORD-9")
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


def test_stuck_approvals_are_those_waiting_long_or_about_to_expire(demo):
    from approvals.models import ApprovalRequest
    from approvals.overview import read
    from durable.console.overview import window_start

    _, old = waiting_claim("ORD-1001")
    _, soon = waiting_claim("ORD-1003")
    assert read(window_start()).stuck == 0
    ApprovalRequest.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(hours=25))
    ApprovalRequest.objects.filter(id=soon.id).update(expires_at=timezone.now() + timedelta(minutes=30))
    assert read(window_start()).stuck == 2


def test_the_overview_links_to_the_metrics_page(viewer):
    assert f'<a href="{reverse("metrics")}" class="metrics-link">Prometheus metrics</a>' in \
        viewer.get(overview_url()).content.decode()


def test_a_status_with_more_runs_in_flight_than_counted_shows_the_count_and_a_plus(viewer, monkeypatch):
    from durable.console import overview

    monkeypatch.setattr(overview, "COUNTED_UP_TO", 2)  # a million parked runs, in small: counting stops past it
    for _ in range(3):
        run_in(RunStatus.WAITING_RETRY)
        run_in(RunStatus.BLOCKED_VERSION)
    run_in(RunStatus.RUNNING)
    html = viewer.get(overview_url()).content.decode()
    assert status_row("WAITING_RETRY", "2+") in html and status_row("BLOCKED_VERSION", "2+") in html
    assert status_row("RUNNING", 1) in html and status_row("PENDING", 0) in html
    assert re.search(r'class="blocked-runs">2\+ runs</a>', html)
