"""In a real browser: an operator ticks runs, sees how many and which the cancel applies to, and cancels them with
one reason; and the runs list's URL follows its filters, one request (and one history entry) per Enter."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from durable.engine.states import RunStatus
from durable.models import Run
from tests.audit import operator_actions
from tests.conftest import user_with_roles
from tests.durable.console.screens import run_in
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_console import pending_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_cancels_ticked_runs_with_one_reason_after_seeing_which(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    first, second = pending_run("ORD-1001"), pending_run("ORD-1002")
    done = run_in(RunStatus.SUCCEEDED, business_key="ORD-1003")
    untouched = pending_run("ORD-1004")
    log_in(page, "olga", "olga-secret")
    page.goto("/runs/")
    for run in (first, second, done):
        page.check(f"input[name=run][value='{run.id}']")
    page.get_by_role("button", name="Cancel selected…").click()

    expect(page.locator("h1")).to_have_text("Cancel 2 runs")
    expect(page.locator("body")).to_contain_text("3 runs chosen")
    expect(page.locator("body")).to_contain_text("Will be cancelled: 2")
    expect(page.locator("body")).to_contain_text("Not applicable, left as they are: 1")
    expect(page.locator("body")).to_contain_text("a SUCCEEDED run cannot be cancelled")
    for run in (first, second, done):
        expect(page.locator("body")).to_contain_text(str(run.id))
    screenshot(page, "bulk-cancel-confirm")

    page.fill("textarea[name=reason]", "the customer withdrew both claims")
    page.check("input[name=confirm]")
    page.get_by_role("button", name="Cancel 2 runs").click()
    expect(page.locator("h1")).to_have_text("Cancelled 2 of 2 runs")
    screenshot(page, "bulk-cancel-result")
    statuses = dict(Run.objects.values_list("id", "status"))
    assert (statuses[first.id], statuses[second.id]) == (RunStatus.CANCELLED, RunStatus.CANCELLED)
    assert (statuses[done.id], statuses[untouched.id]) == (RunStatus.SUCCEEDED, RunStatus.PENDING)
    rows = operator_actions()
    assert sorted(r.run_id for r in rows) == sorted([first.id, second.id])
    assert {(r.actor_username, r.reason) for r in rows} == {("olga", "the customer withdrew both claims")}
    assert len({r.detail["bulk_id"] for r in rows}) == 1


def test_the_runs_list_url_follows_its_filters_with_one_request_per_enter(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    pending_run("ORD-1002")
    pending_run("ORD-1003")
    log_in(page, "olga", "olga-secret")
    page.goto("/runs/")
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url) if "/runs/?" in request.url else None)

    page.fill("input[name=business_key]", "ORD-1002")
    page.press("input[name=business_key]", "Enter")
    expect(page.locator("#run-rows .run-row")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"business_key=ORD-1002"))
    # A later request, waited for: any second request of the Enter was sent before it, so it is counted.
    with page.expect_response(lambda response: "status=RUNNING" in response.url):
        page.select_option("select[name=status]", "RUNNING")
    expect(page.locator("#run-rows .run-row")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"status=RUNNING.*business_key=ORD-1002"))
    assert len(sent) == 2, sent
    assert "business_key=ORD-1002" in sent[0] and "status=&" in sent[0]
    assert "status=RUNNING" in sent[1]

    # One history entry per request, and Back shows the filters its URL says, not the fields as first rendered.
    page.go_back()
    expect(page).to_have_url(re.compile(r"status=&.*business_key=ORD-1002"))
    expect(page.locator("input[name=business_key]")).to_have_value("ORD-1002")
    expect(page.locator("select[name=status]")).to_have_value("")
    expect(page.locator("#run-rows .run-row")).to_have_count(1)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/runs/$"))
    expect(page.locator("input[name=business_key]")).to_have_value("")
    expect(page.locator("#run-rows .run-row")).to_have_count(2)
