"""In a real browser: an approver asks to be emailed of new approvals, one is requested, and the page shows it sent."""
import pytest
from django.core import mail
from playwright.sync_api import Page, expect

from durable.engine.notifications import EventKind
from durable.models import NotificationEvent
from durable.notifications import delivery, fanout
from tests.approvals.flow import waiting_claim
from tests.conftest import user_with_roles
from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_approver_chooses_email_for_new_approvals_and_sees_the_one_sent(page: Page, demo, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    ann = user_with_roles("ann", "approver", password="ann-secret")
    ann.email = "ann@example.com"
    ann.save(update_fields=["email"])
    log_in(page, "ann", "ann-secret")
    page.click("nav >> text=Notifications")
    expect(page.locator("h1")).to_have_text("Notifications")
    page.check("input[name=events][value=approval_requested]")
    page.check("input[name=channels][value=email]")
    page.click("button:has-text('Save')")
    expect(page.locator(".messages")).to_contain_text("preferences are saved")

    _, request = waiting_claim("ORD-1001")  # the step asks: the outbox has the event
    event = NotificationEvent.objects.get(kind=EventKind.APPROVAL_REQUESTED, subject=str(request.id))
    fanout.fan_out(event.id)  # what the workers do after the commit
    [delivery_id] = event.deliveries.values_list("id", flat=True)
    delivery.deliver(delivery_id)
    [message] = mail.outbox
    assert message.to == ["ann@example.com"] and "ORD-1001" in message.subject

    page.reload()
    row = page.locator(".notification-delivery").first
    expect(row).to_contain_text("ORD-1001")
    expect(row).to_contain_text("Sent")
    expect(row).to_contain_text(str(delivery_id))
    screenshot(page, "notifications")
