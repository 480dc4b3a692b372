"""Every console screen from 360 px to 2560 px: nothing scrolls sideways, even with hostile long text.

The world holds strings of thousands of characters without a space (a customer message, an error, a
reason, evidence, a JSON value). Each screen is opened at each width, saved as a full-page screenshot in
test-output/screenshots/<screen>-<width>.png, and its page must be no wider than the window. SCREENS is
checked against the URLconf: a page a browser can GET is either a screen here or excluded with a reason,
so a new page cannot be left out. Adding a screen is one line in SCREENS.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import uuid4

import pytest
from django.urls import reverse
from playwright.sync_api import Browser, Page, expect

from approvals import services as approvals
from approvals.models import ApprovalRequest
from durable import services
from durable.engine.approvals import Revalidation
from durable.engine.limits import REASON_MAX_LENGTH
from durable.models import Checkpoint, Run, SideEffect
from durable.roles import ADMIN
from durable.tokens import create_token
from reconciliation.services import SUCCEEDED, resolve_operation
from tests.approvals.flow import decide, waiting_claim
from tests.conftest import user_with_roles
from tests.durable.claims import advance, needs_attention, start_claim
from tests.e2e.conftest import SCREENSHOTS, log_in, screenshot
from tests.endpoints import World, build_world, logged_in, page_routes

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = [360, 390, 1440, 2560]  # the narrowest phone, a common phone, a laptop, a large monitor
HEIGHT = 900
LONG = "x" * 5000  # a string without a space, far wider than any screen
LONG_REASON = "r" * REASON_MAX_LENGTH  # the longest reason the console keeps
LONG_MESSAGE = "refund ORD-1004 " + "m" * 3900  # the planner needs the word; the rest is one unbroken word


@dataclass
class Seeded:
    """build_world's objects, their text made hostile, and the states only some screens show."""

    world: World
    cancelled: Run  # cancelled with the longest reason; its business key is long and unbroken
    asking: ApprovalRequest  # PENDING, for a run whose customer wrote a long unbroken message
    decided: ApprovalRequest  # REJECTED with the longest reason
    invalidated: ApprovalRequest  # INVALIDATED: the facts it found moved are long
    resolved: SideEffect  # resolved by hand, with the longest evidence

    def url(self, name: str, **kwargs: object) -> str:
        return reverse(name, kwargs=kwargs)


@dataclass(frozen=True)
class Screen:
    name: str  # the screenshot's name
    route: str | None  # the URL name it shows; None for an error page
    path: Callable[[Seeded], str]
    logged_in: bool = True


def newest_checkpoint(run_id: object) -> int:
    return Checkpoint.objects.filter(run_id=run_id).order_by("-seq").values_list("seq", flat=True)[0]


SCREENS = [
    Screen("login", "durable:login", lambda s: s.url("durable:login"), logged_in=False),
    Screen("overview", "durable:overview", lambda s: s.url("durable:overview")),
    Screen("runs", "durable:runs", lambda s: s.url("durable:runs")),
    Screen("run-failed", "durable:run-detail", lambda s: s.url("durable:run-detail", run_id=s.world.failed.id)),
    Screen("run-cancelled", "durable:run-detail", lambda s: s.url("durable:run-detail", run_id=s.cancelled.id)),
    Screen("run-waiting", "durable:run-detail", lambda s: s.url("durable:run-detail", run_id=s.asking.run_id)),
    Screen("checkpoint", "durable:checkpoint-state", lambda s: s.url(
        "durable:checkpoint-state", run_id=s.asking.run_id, seq=newest_checkpoint(s.asking.run_id))),
    Screen("approvals", "approvals:inbox", lambda s: s.url("approvals:inbox")),
    Screen("approval-pending", "approvals:detail", lambda s: s.url("approvals:detail", request_id=s.asking.id)),
    Screen("approval-decided", "approvals:detail", lambda s: s.url("approvals:detail", request_id=s.decided.id)),
    Screen("approval-invalidated", "approvals:detail",
           lambda s: s.url("approvals:detail", request_id=s.invalidated.id)),
    Screen("reconciliation", "reconciliation:operations", lambda s: s.url("reconciliation:operations")),
    Screen("operation-unknown", "reconciliation:operation",
           lambda s: s.url("reconciliation:operation", operation_id=s.world.operation.operation_id)),
    Screen("operation-resolved", "reconciliation:operation",
           lambda s: s.url("reconciliation:operation", operation_id=s.resolved.operation_id)),
    Screen("audit", "audit:trail", lambda s: s.url("audit:trail")),
    Screen("tokens", "durable:tokens", lambda s: s.url("durable:tokens")),
    Screen("filters-refused", "durable:runs", lambda s: s.url("durable:runs") + "?created_after=" + LONG),
    Screen("search", "durable:search", lambda s: s.url("durable:search") + "?q=ord-100"),
    Screen("limits", "durable:limits", lambda s: s.url("durable:limits")),
    Screen("schedules", "durable:schedules", lambda s: s.url("durable:schedules")),
    Screen("schedule", "durable:schedule-detail",
           lambda s: s.url("durable:schedule-detail", schedule_id=s.world.schedule.id)),
    Screen("schedule-new", "durable:schedule-new", lambda s: s.url("durable:schedule-new")),
    Screen("schedule-edit", "durable:schedule-edit",
           lambda s: s.url("durable:schedule-edit", schedule_id=s.world.schedule.id)),
    Screen("preferences", "durable:preferences", lambda s: s.url("durable:preferences")),
    Screen("notifications", "durable:notifications", lambda s: s.url("durable:notifications")),
    Screen("bulk-cancel", "durable:bulk-cancel", lambda s: s.url("durable:bulk-cancel") + f"?run={s.cancelled.id}"
           f"&run={s.world.failed.id}&run={s.asking.run_id}"),
    Screen("bulk-retry", "durable:bulk-retry", lambda s: s.url("durable:bulk-retry") + "?by=filter&status=FAILED"),
    Screen("paused", "durable:paused", lambda s: s.url("durable:paused")),
    Screen("bulk-pause", "durable:bulk-pause", lambda s: s.url("durable:bulk-pause") + f"?run={s.asking.run_id}"),
    Screen("bulk-resume", "durable:bulk-resume", lambda s: s.url("durable:bulk-resume") + "?by=filter&status=PAUSED"),
    # Django's plain 404 has no header (so no logout form): last, or the next screen would log in again.
    Screen("not-found", None, lambda s: s.url("durable:run-detail", run_id=uuid4())),
]
# Pages a browser can GET that are not console screens.
EXCLUDED = {
    "audit:export": "a CSV download, not a page",
    "metrics": "Prometheus' text exposition, read by a scraper",
    "rest_framework:login": "the browsable API's login, Django REST framework's own page",
}


@pytest.fixture
def seeded(sandbox, settings) -> Seeded:
    settings.DURABLE_LLM_BASE_URL = ""  # the deterministic planner, as tests/test_hostile_input.py's world
    world = build_world(sandbox)
    for order_id in ("ORD-1004", "ORD-1005", "ORD-1006", "ORD-1007"):  # a customer's name no screen expects
        sandbox.state.upsert_order({"order_id": order_id, "customer": "c" * 600, "amount": "99.00", "currency": "EUR"})
    admin = user_with_roles("ada", ADMIN, password="ada-secret")
    hostile_error = {"kind": "bug", "message": LONG, "detail": {"downstream_said": LONG}}
    Run.objects.filter(id__in=[world.failed.id, world.blocked.id]).update(error=hostile_error)
    Run.objects.filter(id=world.failed.id).update(input={"customer_message": LONG}, output={"note": LONG})
    SideEffect.objects.filter(operation_id=world.operation.operation_id).update(
        last_error={"message": LONG}, payload={"message": LONG})
    cancelled, _ = services.start_run(workflow="claims-agent", business_key="k" * 200, enqueue=False,
                                      input={"order_id": "ORD-1009", "customer_message": "refund " + "c" * 3990})
    services.cancel_run(run_id=cancelled.id, user=admin, source="test", reason=LONG_REASON)
    asking = advance(start_claim("ORD-1004", message=LONG_MESSAGE, version=2))
    _, rejected = waiting_claim("ORD-1005")
    decide(rejected, admin, verdict="reject", reason=LONG_REASON)
    _, stale = waiting_claim("ORD-1006")
    approvals.invalidate(stale, Revalidation(current={"amount": LONG}, problems=(LONG,)), user=None, source="test")
    _, unknown = needs_attention(sandbox, order_id="ORD-1007")
    resolve_operation(operation_id=unknown.operation_id, user=admin, outcome=SUCCEEDED, reason=LONG_REASON,
                      external_ref="e" * 200, source="test")
    create_token(user=admin, name="n" * 100, by=admin, source="test")
    return Seeded(world, cancelled, ApprovalRequest.objects.get(run=asking, status="PENDING"),
                  ApprovalRequest.objects.get(id=rejected.id), ApprovalRequest.objects.get(id=stale.id),
                  SideEffect.objects.get(operation_id=unknown.operation_id))


def test_every_page_a_browser_gets_is_a_screen_or_excluded_with_a_reason(seeded):
    admin = user_with_roles("root", ADMIN)
    client = logged_in(admin)
    pages = {route.name for route in page_routes() if client.get(seeded.world.url(route.name)).status_code != 405}
    shown = {screen.route for screen in SCREENS if screen.route}
    assert pages - shown - set(EXCLUDED) == set(), "add the new page to SCREENS (or EXCLUDED, with a reason)"
    assert shown | set(EXCLUDED) <= pages, "a screen or exclusion names a page that is gone"


def whole_page_screenshot(page: Page, name: str) -> None:
    """Like conftest's screenshot, by a window as tall as the page: Playwright's full_page capture of a page
    thousands of pixels tall outlasts its timeout on a busy machine; a tall window does the same in a moment."""
    viewport = page.viewport_size
    height = page.evaluate("document.documentElement.scrollHeight")
    page.set_viewport_size({"width": viewport["width"], "height": max(height, viewport["height"])})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    page.set_viewport_size(viewport)


def page_width(page: Page) -> tuple[int, int]:
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


def visit(browser: Browser, base_url: str, width: int, seeded: Seeded) -> list[str]:
    """Open every screen at `width`: its screenshot, and what is wider than the window."""
    context = browser.new_context(base_url=base_url, viewport={"width": width, "height": HEIGHT})
    page = context.new_page()
    page.set_default_timeout(15_000)
    too_wide = []
    try:
        for screen in sorted(SCREENS, key=lambda each: each.logged_in):
            if screen.logged_in and page.locator("form.logout").count() == 0:
                log_in(page, "ada", "ada-secret")
            page.goto(screen.path(seeded))
            page.wait_for_load_state("load")
            whole_page_screenshot(page, f"{screen.name}-{width}")
            scroll_width, window_width = page_width(page)
            if scroll_width > window_width:
                too_wide.append(f"{screen.name} at {width} px is {scroll_width} px wide")
        too_wide += refused_post(page, seeded, width)
    finally:
        context.close()
    return too_wide


def refused_post(page: Page, seeded: Seeded, width: int) -> list[str]:
    """The 400 page: a form posted with more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS, as only a script would."""
    url = seeded.url("durable:run-cancel", run_id=seeded.world.waiting.id)
    page.goto(seeded.url("durable:run-detail", run_id=seeded.world.waiting.id))
    with page.expect_navigation():
        page.evaluate("""url => {
            const form = Object.assign(document.createElement("form"), {method: "post", action: url});
            for (let i = 0; i < 1100; i++) form.append(Object.assign(document.createElement("input"), {name: "f" + i}));
            document.body.append(form);
            form.submit();
        }""", url)
    expect(page.locator("h1")).to_have_text("Bad request")
    whole_page_screenshot(page, f"bad-request-{width}")
    scroll_width, window_width = page_width(page)
    return [f"bad-request at {width} px is {scroll_width} px wide"] if scroll_width > window_width else []


@pytest.mark.parametrize("width", WIDTHS)
def test_no_screen_scrolls_sideways(browser: Browser, live_server, seeded, own_queue, width):
    assert visit(browser, live_server.url, width, seeded) == []


def test_a_table_on_a_phone_shows_each_cell_under_its_column_heading(browser: Browser, live_server, seeded, own_queue):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": HEIGHT})
    page = context.new_page()
    log_in(page, "ada", "ada-secret")
    page.goto("/runs/")
    first = page.locator("#run-rows tr.run-row td").nth(1)  # after the bulk actions' tick box
    assert first.get_attribute("data-label") == "Run"
    assert first.evaluate("cell => getComputedStyle(cell, '::before').content") == '"Run"'
    assert page.locator("table.runs thead").bounding_box()["height"] <= 1  # headings are in each card instead
    page.set_viewport_size({"width": 1440, "height": HEIGHT})
    assert first.evaluate("cell => getComputedStyle(cell, '::before').content") == "none"  # a table again
    context.close()


def test_a_reason_shows_its_count_and_over_the_limit_cannot_be_sent(page: Page, seeded, own_queue):
    log_in(page, "ada", "ada-secret")
    page.goto(seeded.url("approvals:detail", request_id=seeded.asking.id))
    reason = page.locator("#decision textarea[name=reason]")
    count = page.locator("#decision .text-limit")
    expect(count).to_have_text("0 / 4,000 characters")
    reason.fill("duplicate claim")
    expect(count).to_have_text("15 / 4,000 characters")
    reason.fill(LONG)  # pasted whole: nothing is cut behind the operator's back
    assert len(reason.input_value()) == len(LONG)
    expect(count).to_have_text("1,000 characters over the limit of 4,000: shorten it to send.")
    page.locator("#decision button.reject").click()
    assert reason.evaluate("area => area.validationMessage") == count.text_content()
    assert ApprovalRequest.objects.get(id=seeded.asking.id).status == "PENDING"  # nothing was sent
    screenshot(page, "reason-over-the-limit")
    reason.fill(LONG_REASON)
    expect(count).to_have_text("4,000 / 4,000 characters")
    page.locator("#decision button.reject").click()
    expect(page.locator("#decision .status")).to_have_text("REJECTED")
    assert ApprovalRequest.objects.get(id=seeded.asking.id).reason == LONG_REASON  # kept whole
