"""The demo claims-agent, advanced in this process against the sandbox services over real HTTP."""
import pytest

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry
from tests.durable.claims import advance, make_retry_due

pytestmark = pytest.mark.django_db

REFUND = "Hello, order ORD-1001 arrived broken. I would like a refund please."


@pytest.fixture
def scripted_planner(sandbox, settings):
    """The deterministic planner (no LLM endpoint configured), with the sandbox as downstream."""
    settings.DURABLE_LLM_BASE_URL = ""
    return sandbox


@pytest.fixture
def llm_planner(sandbox, settings):
    """The planner talks to the sandbox's OpenAI-compatible chat endpoint."""
    settings.DURABLE_LLM_BASE_URL = sandbox.url + "/v1"
    settings.DURABLE_LLM_API_KEY = ""
    settings.DURABLE_LLM_MODEL = "sandbox-model"
    return sandbox


def start(order_id="ORD-1001", message=REFUND):
    run, _ = services.start_run(workflow="claims-agent", version=1, input={"order_id": order_id, "customer_message": message},
                                business_key=order_id, allow_older_version=True)
    return run




def activities(run):
    return list(JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY)
                .order_by("created_at", "id").values_list("step", "call_index", "name"))


def calls(sandbox, service):
    return sandbox.state.calls_snapshot()[service]["calls"]


def test_a_refund_claim_refunds_the_whole_order_opens_a_ticket_and_notifies_once_each(scripted_planner):
    run = advance(start())
    assert run.status == RunStatus.SUCCEEDED
    assert run.output["proposed_refund"] == {
        "order_id": "ORD-1001", "amount": "120.00", "currency": "EUR", "customer": "Ada Lovelace", "reason": REFUND}
    assert run.output["plan"]["intent"] == "refund"
    assert list(run.checkpoints.values_list("step", flat=True)) == [
        "", "planner", "lookup", "propose_refund", "payment", "ticket", "notify"]
    assert calls(scripted_planner, "orders") == 1
    counts = scripted_planner.state.calls_snapshot()
    assert [counts[s]["effects"] for s in ("payments", "tickets", "notifications")] == [1, 1, 1]
    assert run.output["refund_id"] == "re_1" and run.output["ticket_id"].startswith("TCK-")
    assert set(run.side_effects.values_list("action_name", "status")) == {
        ("refund", "SUCCEEDED"), ("ticket", "SUCCEEDED"), ("notify", "SUCCEEDED")}


def test_the_proposal_takes_what_was_already_refunded_into_account(scripted_planner):
    scripted_planner.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "20.00"})
    run = advance(start())
    assert run.output["proposed_refund"]["amount"] == "100.00"


def test_the_plan_and_the_order_lookup_are_journaled_as_activities(scripted_planner):
    run = advance(start())
    assert activities(run) == [("planner", 0, "llm.plan"), ("lookup", 0, "orders.get")]
    order = JournalEntry.objects.get(run=run, name="orders.get").result
    assert (order["order_id"], order["amount"]) == ("ORD-1001", "120.00")


def test_an_unknown_order_fails_the_run_without_retrying(scripted_planner):
    run = advance(start("ORD-9999", "Refund my order ORD-9999 please, it never arrived and I was charged."))
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("business_rejection", False, "lookup")
    assert "ORD-9999" in run.error["message"]
    assert run.next_attempt_at is None and run.finished_at is not None
    assert calls(scripted_planner, "orders") == 1


def test_a_message_without_a_refund_request_is_a_business_rejection(scripted_planner):
    run = advance(start(message="When will order ORD-1001 be delivered?"))
    assert run.status == RunStatus.FAILED
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == (
        "business_rejection", False, "propose_refund")
    assert run.output is None


@pytest.mark.parametrize("fault,kind", [("503", "transient_http"), ("429", "rate_limited")])
def test_a_transient_orders_failure_waits_for_a_retry_then_succeeds_calling_orders_twice(scripted_planner, fault, kind):
    scripted_planner.state.arm_fault("orders", fault, times=1)
    run = advance(start())
    assert run.status == RunStatus.WAITING_RETRY
    assert (run.error["kind"], run.error["retryable"], run.error["step"], run.attempt) == (kind, True, "lookup", 1)
    assert run.next_attempt_at is not None
    assert calls(scripted_planner, "orders") == 1

    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output["proposed_refund"]["amount"] == "120.00"
    assert calls(scripted_planner, "orders") == 2
    assert activities(run) == [("planner", 0, "llm.plan"), ("lookup", 0, "orders.get")]  # the plan was reused
    assert JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.RETRY_SCHEDULED).count() == 1


def test_the_planner_can_use_an_openai_compatible_endpoint(llm_planner):
    run = advance(start())
    assert run.status == RunStatus.SUCCEEDED
    assert run.output["plan"] == {"intent": "refund", "order_id": "ORD-1001", "reason": "customer requests a refund"}
    assert run.output["proposed_refund"]["amount"] == "120.00"
    assert calls(llm_planner, "llm") == 1
    assert llm_planner.state.calls_snapshot()["llm"]["calls_by_business_key"] == {"ORD-1001": 1}
    assert activities(run) == [("planner", 0, "llm.plan"), ("lookup", 0, "orders.get")]


def test_an_unavailable_llm_endpoint_is_retried_by_durable_not_by_the_sdk(llm_planner):
    llm_planner.state.arm_fault("llm", "503", times=1)
    run = advance(start())
    assert run.status == RunStatus.WAITING_RETRY
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("transient_http", True, "planner")
    assert calls(llm_planner, "llm") == 1  # the SDK's own retries are off

    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert calls(llm_planner, "llm") == 2
    assert calls(llm_planner, "orders") == 1
