"""In a real browser: the header's search box opens a run by its id, lists the runs a part of a business key
finds, and the overview shows now apart from the last 24 hours with its charts."""
import re

import pytest
from playwright.sync_api import Page, expect

from durable import services
from durable.models import Run
from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def pending_run(order_id: str) -> Run:
    run, _ = services.start_run(workflow="claims-agent", business_key=order_id, enqueue=False,
                                input={"order_id": order_id, "customer_message": f"refund {order_id} please"})
    return run


def search(page: Page, text: str) -> None:
    box = page.locator("header form[role=search] input[name=q]")
    box.fill(text)
    box.press("Enter")


def test_a_run_id_typed_in_the_header_opens_the_run_and_a_part_of_a_key_lists_its_runs(page: Page, own_queue):
    user_with_roles("vera", "viewer", password="vera-secret")
    wanted = pending_run("ORD-1002")
    pending_run("ORD-1003")
    pending_run("ORD-2001")
    log_in(page, "vera", "vera-secret")
    page.goto("/runs/")
    search(page, f" {str(wanted.id).upper()} ")
    expect(page).to_have_url(re.compile(rf"/runs/{wanted.id}/$"))
    expect(page.locator("body")).to_contain_text(str(wanted.id))
    search(page, "ord-100")
    expect(page).to_have_url(re.compile(r"/search/\?q=ord-100$"))
    hits = page.locator("tr.search-hit")
    expect(hits).to_have_count(2)
    expect(hits.first).to_contain_text("business key ORD-1003")  # newest first
    expect(page.locator("header form[role=search]")).to_be_visible()
    screenshot(page, "search-results")
    hits.nth(1).locator("a").click()
    expect(page).to_have_url(re.compile(rf"/runs/{wanted.id}/$"))


def test_the_overview_shows_now_apart_from_the_last_day_with_hourly_charts(page: Page, own_queue):
    user_with_roles("vera", "viewer", password="vera-secret")
    pending_run("ORD-1001")
    log_in(page, "vera", "vera-secret")
    page.goto("/")
    now = page.locator("section.overview-now")
    expect(now.locator("h2")).to_have_text("Now")
    expect(now.locator("tr", has_text="PENDING").locator("td.count")).to_have_text("1")
    last_day = page.locator("section.overview-last-day")
    expect(last_day.locator("h2")).to_have_text("Last 24 hours")
    started = last_day.locator("tr.last-day-started")
    expect(started.locator("td.count")).to_have_text("1")
    expect(started.locator("svg.hourly-chart rect")).to_have_count(1)
    expect(last_day.locator("svg.hourly-chart")).to_have_count(5)
    screenshot(page, "overview-now-and-last-day")
    started.locator("td.count a").click()  # the number opens the runs list that shows those runs
    expect(page.locator("#run-rows .run-row")).to_have_count(1)
