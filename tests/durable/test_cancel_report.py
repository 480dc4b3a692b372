"""A cancel says what already happened (side effects that succeeded, with their references), what may have
happened (a call in flight, an UNKNOWN outcome), and what it stopped: in the service's answer, the API's, the
console's message and the audit row."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from durable import services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import SideEffect
from durable.roles import OPERATOR
from tests.approvals.flow import waiting_claim
from tests.audit import operator_actions
from tests.conftest import api_token, user_with_roles
from tests.durable.claims import needs_attention
from tests.durable.console.screens import run_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def refunded(demo):
    """A claim whose refund the payments sandbox paid (SUCCEEDED, with its reference), whose ticket was opened,
    and whose customer notification is UNKNOWN: cancelling it cannot take the refund back, and must say so."""
    run, notification = needs_attention(demo, order_id="ORD-1003")
    refund = SideEffect.objects.get(run=run, action_name="refund")
    assert refund.status == Op.SUCCEEDED and refund.external_ref
    return run, refund, notification


def ticket_of(run) -> SideEffect:
    return SideEffect.objects.get(run=run, action_name="ticket")


@pytest.fixture
def operator(db):
    return user_with_roles("oscar", OPERATOR)


def test_the_cancel_service_names_the_refund_already_paid_and_the_notification_that_may_have_gone(refunded):
    run, refund, notification = refunded
    cancellation = services.cancel_run(run_id=run.id, user=None, source="test", reason="customer withdrew")
    assert cancellation.run.status == RunStatus.CANCELLED
    assert [(e.action, e.operation_id, e.external_ref) for e in cancellation.happened] == [
        ("refund", refund.operation_id, refund.external_ref), ("ticket", ticket_of(run).operation_id, "TCK-1")]
    assert [(e.action, e.status) for e in cancellation.may_have_happened] == [("notify", Op.UNKNOWN)]
    summary = cancellation.summary()
    assert f"refund (operation {refund.operation_id}, reference {refund.external_ref})" in summary
    assert "not undone by cancelling" in summary and "May have happened: notify" in summary
    assert "will not run again. No side effect" not in summary


def test_the_audit_row_of_a_cancel_records_what_had_happened_and_what_it_stopped(refunded, operator):
    run, refund, _ = refunded
    services.cancel_run(run_id=run.id, user=operator, source="console", reason="duplicate")
    action = operator_actions().get(run=run, action="cancel")
    assert action.detail["already_happened"][0] == {"action": "refund", "operation_id": refund.operation_id,
                                                    "status": Op.SUCCEEDED, "external_ref": refund.external_ref}
    assert [e["action"] for e in action.detail["may_have_happened"]] == ["notify"]
    assert action.detail["stopped"] and "NEEDS_ATTENTION until now" in action.detail["stopped"][0]


def test_the_api_answer_to_a_cancel_names_the_refund_and_its_reference(refunded, operator):
    run, refund, _ = refunded
    api = Client(HTTP_AUTHORIZATION=f"Token {api_token(operator)}")
    response = api.post(f"/api/runs/{run.id}/cancel/", {"reason": "duplicate"}, content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == RunStatus.CANCELLED
    assert body["cancellation"]["already_happened"][0] == {"action": "refund", "operation_id": refund.operation_id,
                                                           "status": "SUCCEEDED", "external_ref": refund.external_ref}
    assert refund.external_ref in body["cancellation"]["summary"]


def test_the_consoles_message_after_a_cancel_names_the_refund_and_its_reference(refunded, operator):
    run, refund, _ = refunded
    console = Client()
    console.force_login(operator)
    response = console.post(f"/runs/{run.id}/cancel/", {"reason": "duplicate", "confirm": "on"})
    assert response.status_code == 302
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("Cancelled. The run will not run again. Already done, and not undone by cancelling: "
                              f"refund (operation {refund.operation_id}, reference {refund.external_ref})")
    assert "Cancelled. The run will not run again." != message


def test_a_cancel_while_a_worker_has_a_side_effect_in_flight_says_it_may_still_complete():
    run = run_in(RunStatus.RUNNING, current_step="payment", lease_owner="worker-7", fencing_token=3,
                 lease_expires_at=timezone.now() + timedelta(minutes=1))
    SideEffect.objects.create(operation_id="b" * 32, run=run, step="payment", action_name="refund", business_key="k",
                              request_hash="h" * 64, status=Op.STARTED)
    summary = services.cancel_run(run_id=run.id, user=None, source="test").summary()
    assert f"May have happened: refund (operation {'b' * 32}), STARTED" in summary
    assert "A call in flight may still complete" in summary
    assert "step 'payment', running on worker-7: it loses its lease at its next write" in summary


def test_a_cancel_of_a_run_waiting_for_approval_says_nothing_happened_and_the_request_was_invalidated(demo):
    run, _ = waiting_claim("ORD-1001")
    summary = services.cancel_run(run_id=run.id, user=None, source="test").summary()
    assert "No side effect of it had happened." in summary
    assert "1 pending approval request, now INVALIDATED" in summary
