"""In a real browser: the inbox's tabs, and two approvers acting on one request at once in two browsers; both
pages end showing the decision that won, the loser's with the 409's message."""
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.models import ApprovalRequest
from tests.approvals.flow import waiting_claim
from tests.conftest import user_with_roles
from tests.e2e.conftest import browser_page, log_in, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fast_polls(settings):
    settings.DURABLE_CONSOLE_POLL_SECONDS = 1


@pytest.fixture
def other_page(browser: Browser, live_server) -> Iterator[Page]:
    """A second person's browser."""
    yield from browser_page(browser, live_server)


def two_approvers_on(page: Page, other_page: Page, request: ApprovalRequest) -> None:
    user_with_roles("ann", "approver", password="ann-secret")
    user_with_roles("bob", "approver", password="bob-secret")
    log_in(page, "ann", "ann-secret")
    log_in(other_page, "bob", "bob-secret")
    for each in (page, other_page):
        each.goto(f"/approvals/{request.id}/")
        expect(each.locator("button[value=approve]")).to_be_visible()


def click_approve_on_both(page: Page, other_page: Page) -> None:
    """Both approvers press Approve before either answer is back."""
    with page.expect_response(lambda r: r.url.endswith("/decide/")), \
            other_page.expect_response(lambda r: r.url.endswith("/decide/")):
        page.locator("button[value=approve]").click(no_wait_after=True)
        other_page.locator("button[value=approve]").click(no_wait_after=True)


def test_two_approvers_approve_a_one_approver_request_at_once(demo, page: Page, other_page: Page):
    _, request = waiting_claim()
    two_approvers_on(page, other_page, request)
    click_approve_on_both(page, other_page)
    request.refresh_from_db()
    winner = request.decided_by.get_username()

    assert request.status == "APPROVED" and request.decisions.count() == 1
    for each in (page, other_page):
        expect(each.locator("#decision h2")).to_contain_text("APPROVED")
        expect(each.locator("#decision")).to_contain_text(f"by {winner}")
        expect(each.locator("button[value=approve]")).to_have_count(0)
        expect(each.locator("#approvals-badge")).to_have_text("0")  # the header's badge, out of band
    loser = other_page if winner == "ann" else page
    expect(loser.locator("#decision .outcome-error")).to_contain_text(f"already approved by {winner}")
    screenshot(loser, "approval-lost-race")


def test_two_approvers_approve_a_two_approver_request_at_once(demo, page: Page, other_page: Page):
    _, request = waiting_claim()
    ApprovalRequest.objects.filter(id=request.id).update(approvers_required=2)
    two_approvers_on(page, other_page, request)
    click_approve_on_both(page, other_page)
    request.refresh_from_db()
    # Either both approvals landed (APPROVED) or one lost the race on the count and was told to look again;
    # whichever it was, both pages end showing what the database holds, the first one by polling.
    for each in (page, other_page):
        expect(each.locator("#decision h2")).to_contain_text(request.status)
        expect(each.locator("#decision")).to_contain_text(f"{request.approvals_count} of 2 required")
        expect(each.locator("button[value=approve]")).to_have_count(0)
    screenshot(page, "approval-two-approvers")


def test_the_inbox_tabs_follow_a_decision_without_a_reload(demo, page: Page, other_page: Page):
    _, request = waiting_claim()
    ApprovalRequest.objects.filter(id=request.id).update(approvers_required=2)
    user_with_roles("ann", "approver", password="ann-secret")
    log_in(page, "ann", "ann-secret")
    page.goto("/approvals/?tab=needs_me")
    expect(page.locator(".tab-needs_me .count")).to_have_text("1")
    expect(page.locator("#approval-rows")).to_contain_text("ORD-1001")
    expiry = page.locator("#approval-rows td:has(time.countdown) time.when")
    expect(expiry).to_have_attribute("datetime", f"{request.expires_at:%Y-%m-%dT%H:%M:%SZ}")
    screenshot(page, "inbox-tabs")
    other_page.goto(f"/approvals/{request.id}/")  # ann decides in another tab of hers
    log_in(other_page, "ann", "ann-secret")
    other_page.goto(f"/approvals/{request.id}/")
    other_page.locator("button[value=approve]").click()
    expect(other_page.locator("#decision")).to_contain_text("it waits for another approver")
    expect(page.locator(".tab-needs_me .count")).to_have_text("0")  # the first tab caught up by itself
    expect(page.locator(".tab-approved_by_me .count")).to_have_text("1")
