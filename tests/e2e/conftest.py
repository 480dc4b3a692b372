"""Real-browser tests: Playwright drives Debian's Chromium against a live server.

The browser is /usr/bin/chromium (`apt-get install chromium`; CI installs it). A missing
browser fails these tests; nothing is skipped. Screenshots of each screen land in
test-output/screenshots/.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.conftest import OUTPUT_DIR

CHROMIUM = os.environ.get("DURABLE_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = OUTPUT_DIR / "screenshots"

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between browser steps are still synchronous, one at a time.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"the browser tests need Chromium at {CHROMIUM}: apt-get install chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def browser_page(browser: Browser, live_server) -> Iterator[Page]:
    """A page in a browser context of its own: its own cookies, so its own session."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def page(browser: Browser, live_server) -> Iterator[Page]:
    yield from browser_page(browser, live_server)


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
