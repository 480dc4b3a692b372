"""In a real browser: highlighted JSON that copies, times in the browser's zone, the styled login page, the favicon."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Page, expect

from durable.models import OperatorPreferences
from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in, screenshot
from tests.e2e.test_console import pending_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tokyo_page(browser: Browser, live_server) -> Iterator[Page]:
    """A browser in Tokyo that lets the page use the clipboard."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900},
                                  timezone_id="Asia/Tokyo")
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def test_the_login_page_is_styled_and_the_favicon_is_served(page: Page):
    page.goto("/accounts/login/")
    card = page.locator(".login-card")
    expect(card).to_be_visible()
    assert card.evaluate("element => getComputedStyle(element).backgroundColor") == "rgb(255, 255, 255)"
    icons = page.locator("link[rel=icon]")  # the console's SVG, then the standalone project's own icon
    assert icons.evaluate_all("links => links.map(link => link.getAttribute('href'))") == [
        "/static/durable/favicon.svg", "/static/favicon.ico"]
    screenshot(page, "login")
    answer = page.request.get("/favicon.ico")  # redirected to the project's own file
    assert answer.status == 200 and answer.body() == (Path(settings.BASE_DIR) / "static" / "favicon.ico").read_bytes()


def test_times_follow_the_browsers_zone_and_json_is_highlighted_and_copies(tokyo_page: Page, own_queue):
    user = user_with_roles("olga", "operator", password="olga-secret")
    run = pending_run("ORD-1002")
    log_in(tokyo_page, "olga", "olga-secret")
    assert OperatorPreferences.objects.get(user=user).time_zone == "Asia/Tokyo"

    tokyo_page.goto(f"/runs/{run.id}/")
    created = tokyo_page.locator("dl.contract time.when").first
    expect(created).to_contain_text("JST")
    assert created.get_attribute("datetime").endswith("Z")

    block = tokyo_page.locator(".json-block").first
    expect(block.locator(".json-key").first).to_be_visible()
    assert block.locator(".json-key").first.evaluate("element => getComputedStyle(element).color") != \
        block.locator(".json-string").first.evaluate("element => getComputedStyle(element).color")
    block.locator("button.json-copy").click()
    expect(block.locator("button.json-copy")).to_have_text("Copied")
    copied = tokyo_page.evaluate("navigator.clipboard.readText()")
    assert json.loads(copied) == run.input
    screenshot(tokyo_page, "readable-run")
