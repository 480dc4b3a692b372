"""In a real browser: an approver logs in, approves a pending refund, and sees the run finish."""
import pytest
from playwright.sync_api import Page, expect

from tests.approvals.flow import pending_request, start_v2_claim
from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in, screenshot
from tests.waiting import status_of, wait_for

# A real worker takes the runs to their approval and, once approved, to the end.
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_an_approver_approves_a_refund_in_the_browser_and_the_run_finishes(page: Page, demo, session_worker):
    user_with_roles("ann", "approver", password="ann-secret")
    run = start_v2_claim("ORD-1001")
    request = pending_request(run)
    log_in(page, "ann", "ann-secret")
    page.goto("/approvals/")
    expect(page.locator("nav")).to_contain_text("Approvals")
    expect(page.locator("#approval-rows")).to_contain_text("ORD-1001")
    screenshot(page, "approvals-inbox")
    page.locator("#approval-rows a", has_text="refund").first.click()
    expect(page.locator("h1")).to_contain_text("Refund for ORD-1001")
    expect(page.locator("body")).to_contain_text(request.snapshot_hash[:12])
    screenshot(page, "approval-detail")
    page.click("button[value=approve]")
    expect(page.locator("#decision")).to_contain_text("APPROVED")
    screenshot(page, "approval-approved")
    wait_for(lambda: status_of(run.id) == "SUCCEEDED", what="the approved run to finish on the worker")
    page.goto(f"/runs/{run.id}/")
    expect(page.locator("h1")).to_contain_text("SUCCEEDED")


def test_a_stale_approval_is_refused_in_the_browser_and_shows_the_values_now(page: Page, demo, session_worker):
    user_with_roles("ann", "approver", password="ann-secret")
    request = pending_request(start_v2_claim("ORD-1001"))
    log_in(page, "ann", "ann-secret")
    page.goto(f"/approvals/{request.id}/")
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})  # the order changes behind the page
    page.click("button[value=approve]")
    expect(page.locator("#decision")).to_contain_text("INVALIDATED")
    expect(page.locator("table.facts")).to_have_count(1)  # the facts now, once, beside the snapshot
    expect(page.locator("table.facts")).to_contain_text("150.00")
    screenshot(page, "approval-invalidated")
