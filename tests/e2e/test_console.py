"""In a real browser: an operator filters runs, cancels one, and a reconciler resolves an UNKNOWN notification.

The runs are advanced in this process on a queue no worker reads, so the browser sees
exactly the states the test made. Every screen is saved as a screenshot.
"""
import re

import pytest
from playwright.sync_api import Page, expect

from durable import services
from durable.engine.ledger import OperationStatus
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from tests.audit import operator_actions
from tests.conftest import user_with_roles
from tests.durable.claims import needs_attention
from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def pending_run(order_id: str) -> Run:
    run, _ = services.start_run(workflow="claims-agent", business_key=order_id, enqueue=False,
                                input={"order_id": order_id, "customer_message": f"refund {order_id} please"})
    return run


def test_an_operator_filters_the_runs_list_and_opens_a_run(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    wanted = pending_run("ORD-1002")
    pending_run("ORD-1003")
    log_in(page, "olga", "olga-secret")
    page.goto("/")
    expect(page.locator("h1")).to_contain_text("Overview")
    screenshot(page, "overview")
    page.goto("/runs/")
    expect(page.locator("#run-rows .run-row")).to_have_count(2)
    page.fill("input[name=business_key]", "ORD-1002")
    page.press("input[name=business_key]", "Enter")
    expect(page.locator("#run-rows .run-row")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"business_key=ORD-1002"))  # a deep link keeps the filter
    screenshot(page, "runs-filtered")
    page.reload()
    expect(page.locator("#run-rows .run-row")).to_have_count(1)
    page.locator("#run-rows .run-row a").first.click()
    expect(page.locator("body")).to_contain_text(str(wanted.id))
    screenshot(page, "run-detail")


def test_an_operator_cancels_a_run_after_confirming(page: Page, own_queue):
    user_with_roles("olga", "operator", password="olga-secret")
    run = pending_run("ORD-1001")
    log_in(page, "olga", "olga-secret")
    page.goto(f"/runs/{run.id}/")
    page.locator("summary", has_text="Cancel").click()
    form = page.locator("form[action$='/cancel/']")
    form.locator("textarea[name=reason], input[name=reason]").fill("customer withdrew the claim")
    form.locator("button[type=submit]").click()
    expect(page.locator("#run-actions")).to_contain_text("confirm")  # refused: nothing done without the box
    assert Run.objects.get(id=run.id).status == RunStatus.PENDING
    form = page.locator("form[action$='/cancel/']")
    form.locator("textarea[name=reason], input[name=reason]").fill("customer withdrew the claim")
    form.locator("input[name=confirm]").check()
    form.locator("button[type=submit]").click()
    expect(page.locator("#run-status")).to_have_text("CANCELLED")
    screenshot(page, "run-cancelled")
    assert Run.objects.get(id=run.id).status == RunStatus.CANCELLED
    action = operator_actions().get(run=run)
    assert (action.actor.username, action.action, action.source) == ("olga", "cancel", "console")
    page.goto("/audit/")
    expect(page.locator("#audit-rows")).to_contain_text("customer withdrew the claim")
    screenshot(page, "audit-trail")


def test_a_reconciler_resolves_an_unknown_notification_with_evidence(page: Page, demo, own_queue):
    user_with_roles("rita", "reconciler", password="rita-secret")
    run, row = needs_attention(demo)
    log_in(page, "rita", "rita-secret")
    page.goto("/")
    expect(page.locator("body")).to_contain_text("UNKNOWN")
    page.goto("/reconciliation/")
    expect(page.locator("body")).to_contain_text(row.operation_id)
    screenshot(page, "reconciliation-list")
    page.goto(f"/reconciliation/{row.operation_id}/")
    screenshot(page, "reconciliation-operation")
    panel = page.locator("#resolution")
    panel.locator("input[name=outcome][value=succeeded]").check()
    panel.locator("input[name=external_ref]").fill("ntf-42")
    panel.locator("textarea[name=reason]").fill("the provider's outbox shows ntf-42 sent to the customer")
    panel.locator("button[type=submit]").click()
    expect(page.locator("#resolution")).to_contain_text("SUCCEEDED")
    screenshot(page, "reconciliation-resolved")
    resolved = SideEffect.objects.get(operation_id=row.operation_id)
    assert (resolved.status, resolved.external_ref, resolved.resolved_by.username) == (
        OperationStatus.SUCCEEDED, "ntf-42", "rita")
    assert Run.objects.get(id=run.id).status == RunStatus.PENDING  # it continues from its checkpoint
