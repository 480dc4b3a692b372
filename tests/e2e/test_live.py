"""In a real browser: a run's page follows the database without a reload, asks with If-None-Match and is
answered 304 while nothing changed, and never replaces a form the operator is filling in."""
import pytest
from playwright.sync_api import Page, expect

from durable import services
from durable.engine.states import RunStatus
from durable.models import Run
from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fast_polls(settings):
    settings.DURABLE_CONSOLE_POLL_SECONDS = 1


def waiting_run(order_id: str = "ORD-1002") -> Run:
    run, _ = services.start_run(workflow="claims-agent", business_key=order_id, enqueue=False,
                                input={"order_id": order_id, "customer_message": f"refund {order_id} please"})
    Run.objects.filter(id=run.id).update(status=RunStatus.WAITING_RETRY)
    return run


def open_cancel(page: Page, run: Run, reason: str) -> None:
    """The operator opens the run's page and starts a cancel, with a reason typed in."""
    user_with_roles("olga", "operator", password="olga-secret")
    log_in(page, "olga", "olga-secret")
    page.goto(f"/runs/{run.id}/")
    page.locator("summary", has_text="Cancel the run").click()
    page.fill("#run-actions details[open] textarea[name=reason]", reason)


def is_poll(run: Run, status: int):
    return lambda response: response.url.endswith(f"/runs/{run.id}/") and response.status == status


def test_a_run_page_follows_the_database_and_polls_with_if_none_match(page: Page):
    user_with_roles("olga", "operator", password="olga-secret")
    run = waiting_run()
    log_in(page, "olga", "olga-secret")
    page.goto(f"/runs/{run.id}/")
    expect(page.locator("#run-status")).to_have_text("WAITING_RETRY")
    # Chromium passes the 304 through to htmx (the page itself sent If-None-Match; no-store keeps no copy).
    with page.expect_response(is_poll(run, 304), timeout=10_000) as unchanged:
        pass
    assert unchanged.value.request.headers["if-none-match"] == unchanged.value.headers["etag"]
    expect(page.locator("summary", has_text="Retry now")).to_be_visible()
    Run.objects.filter(id=run.id).update(status=RunStatus.FAILED, error={"kind": "refused", "message": "no"})
    expect(page.locator("#run-status")).to_have_text("FAILED")  # no reload: the next poll brought it
    expect(page.locator("#run-actions")).to_contain_text("The run is FAILED")
    screenshot(page, "live-run-updated")


def test_an_action_shows_the_new_status_and_only_the_actions_it_allows(page: Page):
    run = waiting_run()
    open_cancel(page, run, "the customer withdrew")
    page.locator("#run-actions details[open] input[name=confirm]").check()
    page.locator("#run-actions details[open] button[type=submit]").click()
    expect(page.locator("#run-status")).to_have_text("CANCELLED")
    expect(page.locator("#run-actions")).to_contain_text("The run has ended; nothing more can be done to it.")
    expect(page.locator("#run-actions summary")).to_have_count(0)
    # The region shows the version of what it shows: the next poll is a 304 and the outcome stays.
    with page.expect_response(is_poll(run, 304), timeout=10_000):
        pass
    expect(page.locator("#run-actions .outcome-success")).to_be_visible()


def test_a_poll_waits_while_the_operator_fills_in_a_form(page: Page):
    run = waiting_run()
    open_cancel(page, run, "half typed")
    Run.objects.filter(id=run.id).update(status=RunStatus.FAILED)
    # A poll asked for now is refused by live.js before it is sent: the form and what was typed stay.
    sent = page.evaluate("""() => htmx.ajax("GET", location.pathname, {source: "#run-live", target: "#run-live",
                                                                       swap: "outerHTML"}).then(() => true)""")
    assert sent
    expect(page.locator("#run-actions details[open] textarea[name=reason]")).to_have_value("half typed")
    expect(page.locator("#run-status")).to_have_text("WAITING_RETRY")
    # Once the operator lets go of the form, the page catches up by itself.
    page.fill("#run-actions details[open] textarea[name=reason]", "")
    page.locator("summary", has_text="Cancel the run").click()
    page.locator("h1").click()
    expect(page.locator("#run-status")).to_have_text("FAILED")
