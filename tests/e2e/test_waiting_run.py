"""In a real browser at a phone's width: a parked run's page says what it waits for, readable at 390 px.

A parent parked on two child runs, with an event in its mailbox whose payload is one long unbroken word; advanced
in this process. Screenshots: test-output/screenshots/waiting-run-390.png (the wait), mailbox-390.png.
"""
import pytest
from playwright.sync_api import Browser, expect

from durable import send_event
from tests.conftest import user_with_roles
from tests.durable.console.parked import parked
from tests.e2e.conftest import SCREENSHOTS, log_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_parent_waiting_on_its_children_reads_on_a_phone(browser: Browser, live_server, own_queue, tmp_path):
    user_with_roles("olga", "operator", password="olga-secret")
    run = parked("test-parent", tmp_path, key="CASE-" + "7" * 120, children=2)
    send_event(run_id=run.id, name="customer.reply", payload={"text": "x" * 3000}, sender="webhook:" + "h" * 150)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, "olga", "olga-secret")
        page.goto(f"/runs/{run.id}/")
        wait = page.locator("section.waiting-for")
        expect(wait.locator("h2")).to_have_text("Waiting for 2 child runs to end")
        expect(wait.locator("table.waited-children tbody tr")).to_have_count(2)
        expect(page.locator("table.mailbox tbody tr")).to_have_count(1)
        scroll_width, window_width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll_width <= window_width, f"the page is {scroll_width} px wide at {window_width} px"
        for section in (wait, page.locator("section.run-mailbox")):
            box = section.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= window_width
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        wait.screenshot(path=str(SCREENSHOTS / "waiting-run-390.png"))
        page.locator("section.run-mailbox").screenshot(path=str(SCREENSHOTS / "mailbox-390.png"))
    finally:
        context.close()
