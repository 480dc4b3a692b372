"""The demo support-agent waiting on the world: a refund asked for without a reason makes it ask the customer
and wait for the reply (an event), a refund above 100 EUR is scored by a fraud-check child run first, and the
follow-up email comes after a durable timer. Advanced in this process against the sandbox over real HTTP."""
import pytest

from approvals.models import ApprovalRequest
from durable import send_event, services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, RunEvent
from durable.runtime import wakes
from durable.tools.demo import commands
from tests.approvals.flow import decide
from tests.conftest import make_user
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db(transaction=True)

ORDER = "ORD-1005"  # 240.00 EUR: above the fraud check's threshold


@pytest.fixture
def ann(db):
    return make_user("ann", "approvals.decide_approvalrequest")


@pytest.fixture
def scripted(sandbox, settings):
    settings.DURABLE_LLM_BASE_URL = ""
    settings.DURABLE_DEMO_FOLLOW_UP_SECONDS = 3600


def start() -> Run:
    run, _ = services.start_run(workflow="support-agent", business_key=ORDER,
                                input={"order_id": ORDER, "customer_message": commands.SUPPORT[ORDER]})
    return run


def reply(run: Run) -> None:
    body = commands.reply_body(ORDER)
    delivery = send_event(workflow=body["workflow"], business_key=body["business_key"], name=body["name"],
                          payload=body["payload"], idempotency_key="reply-1", sender="support-desk")
    assert delivery.event.run_id == run.id


def make_timer_due(run: Run) -> None:
    from datetime import timedelta

    from django.utils import timezone

    run.refresh_from_db()
    past = timezone.now() - timedelta(seconds=1)
    Run.objects.filter(id=run.id).update(next_attempt_at=past, waiting_for={**run.waiting_for, "until": past.isoformat()})
    assert wakes.wake_due() == [run.id]


def test_a_refund_without_a_reason_asks_the_customer_checks_for_fraud_and_follows_up(scripted, sandbox, ann):
    run = advance(start())
    assert run.status == RunStatus.WAITING, run.error  # it emailed the question and waits for the reply
    assert run.waiting_for["kind"] == "event" and run.waiting_for["events"] == ["customer_reply"]
    assert run.next_attempt_at is not None  # the reply's deadline: DURABLE_DEMO_REPLY_SECONDS
    reply(run)
    run = advance(run)
    # The reply gave a reason: the model proposed the refund, and a fraud-check child run scores it first.
    assert run.status == RunStatus.WAITING and run.waiting_for["kind"] == "child"
    child = Run.objects.get(parent_run=run)
    assert (child.workflow_name, child.business_key) == ("fraud-check", f"{ORDER}:fraud-check:{run.id}")
    child = advance(child)
    assert child.status == RunStatus.SUCCEEDED and child.output["risk"] == "low"
    run = advance(run)
    assert run.status == RunStatus.WAITING_APPROVAL, run.error
    decide(ApprovalRequest.objects.get(run=run, status="PENDING"), ann)
    run = advance(run)
    # Refunded and emailed; now it sleeps before its follow-up email.
    assert run.status == RunStatus.WAITING and run.waiting_for["kind"] == "timer", run.error
    make_timer_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["tools_called"] == ["lookup_order", "past_tickets", "ask_customer", "propose_refund",
                                          "send_email", "follow_up"]
    assert run.output["refund_id"] and len(run.output["email_ids"]) == 3  # the question, the refund, the follow-up
    assert sandbox.state.calls_snapshot()["payments"]["effects"] == 1
    assert RunEvent.objects.get(run=run).consumed_at is not None
    assert Run.objects.filter(parent_run=run).count() == 1  # one child, however often the visit ran again
    kinds = set(JournalEntry.objects.filter(run=run).values_list("kind", flat=True))
    assert {"wait", "wait_ended", "event_received", "child_started"} <= kinds


def test_a_customer_who_never_replies_gets_an_answer_when_the_deadline_passes(scripted, sandbox):
    run = advance(start())
    make_timer_due(run)  # the reply's deadline passes
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert "did not hear back" in run.output["answer"] and run.output["refund_id"] is None


def test_a_high_fraud_risk_holds_the_refund_and_the_model_is_told(scripted, sandbox):
    for n in range(3):
        sandbox.state.create_ticket(None, {"business_key": ORDER, "subject": f"refund request {n}"})
    run = advance(start())
    reply(run)
    run = advance(run)
    advance(Run.objects.get(parent_run=run))
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert "fraud check held the refund" in run.output["answer"]
    assert not ApprovalRequest.objects.filter(run=run).exists()
    assert sandbox.state.calls_snapshot()["payments"]["effects"] == 0
