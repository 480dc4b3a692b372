"""In a real browser, under the Content Security Policy: every screen loads without a violation, and htmx still works.

Chromium reports each refused script, style or frame on the console ("Refused to ... because it
violates the following Content Security Policy directive"); the test collects those messages.
"""
import pytest
from playwright.sync_api import Page, expect

from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in
from tests.e2e.test_console import pending_run

pytestmark = pytest.mark.django_db(transaction=True)


def collect_violations(page: Page) -> list[str]:
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    return violations


def test_every_screen_loads_under_the_policy_without_a_violation(page: Page, own_queue):
    admin = user_with_roles("ada", "admin", password="ada-secret")
    admin.is_staff = True
    admin.save(update_fields=["is_staff"])
    run = pending_run("ORD-1002")
    violations = collect_violations(page)
    log_in(page, "ada", "ada-secret")
    screens = ["/", "/runs/", f"/runs/{run.id}/", "/approvals/", "/reconciliation/", "/audit/",
               "/notifications/", "/api/", "/api/runs/", f"/api/runs/{run.id}/", "/admin/", "/admin/durable/run/",
               "/admin/durable/notificationdelivery/"]
    for screen in screens:
        response = page.goto(screen)
        assert response is not None and response.status == 200, screen
        assert "Content-Security-Policy" in response.headers or "content-security-policy" in response.headers
        page.wait_for_load_state("load")
    assert violations == []


def test_htmx_filters_the_runs_list_under_the_policy(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    pending_run("ORD-1002")
    pending_run("ORD-1003")
    violations = collect_violations(page)
    log_in(page, "olga", "olga-secret")
    page.goto("/runs/")
    assert page.evaluate("typeof window.htmx") == "object"  # the script loaded from our static files
    page.fill("input[name=business_key]", "ORD-1003")
    page.press("input[name=business_key]", "Enter")
    expect(page.locator("#run-rows .run-row")).to_have_count(1)  # swapped in by htmx, not a reload
    assert violations == []
