"""One run's life is one trace (docs/observability.md, "Traces"): its root opened by the API request that started
it, every worker task under that root, and under each task the step visits, activities, model calls, side effects
and waits, with the attributes that name them; checked with OpenTelemetry's in-memory exporter, in this process."""
from __future__ import annotations

import pytest
from celery.signals import before_task_publish
from django.db import connection
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, StatusCode

from approvals.models import ApprovalRequest
from durable import forks, services, tracing
from durable.engine.errors import AwaitingApproval
from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from durable.runtime import executor
from durable.runtime.fault_points import AFTER_COMMIT
from tests.approvals.flow import decide
from tests.conftest import make_user
from tests.durable.claims import make_retry_due
from tests.durable.ledger_workflows import SimulatedCrash, crash_at, expire_lease, probe
from tests.durable.tracing.traced_workflow import MODEL

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight


@pytest.fixture
def published():
    """The headers of each message sent to the broker, as the Celery instrumentation left them."""
    sent = []

    def keep(headers=None, **_):
        sent.append(dict(headers or {}))

    before_task_publish.connect(keep, weak=False)  # after the instrumentation's receiver: its traceparent is in
    yield sent
    before_task_publish.disconnect(keep)


def test_one_run_is_one_trace_from_the_request_that_started_it_to_its_last_step(traces, published, api):
    # The web: the API request starts the run; its message goes to the broker once the start is committed.
    response = api.post("/api/runs/", {"workflow": "test-traced", "input": {"order": "ORD-9"},
                                       "business_key": "ORD-9"}, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(id=response.json()["id"])
    # The worker, first task: it takes the message as Celery's instrumentation would, in the message's trace.
    with traces.tracer.start_as_current_span("run/durable.advance_run", context=extract(published[0]),
                                                         kind=SpanKind.CONSUMER):
        executor.advance(run.id)
    request = ApprovalRequest.objects.get(run=run)
    decide(request, make_user("ann", "approvals.decide_approvalrequest"))
    executor.advance(run.id)  # the second task, sent by the decision (another trace): under the run's root
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error

    tree = traces.tree()
    root = tree.one("run test-traced")
    http = next(span for span in tree.spans if span.kind == SpanKind.SERVER)
    # The root: a trace of the run's own, linked to the request that started it, stored on the run.
    assert root.parent is None and [link.context.span_id for link in root.links] == [http.context.span_id]
    assert root.attributes["durable.run_id"] == str(run.id) and root.attributes["durable.run.created"] is True
    trace_id = root.context.trace_id
    assert http.context.trace_id != trace_id
    assert tracing.trace_id(run) == format(trace_id, "032x")
    # The broker: the message was sent inside the root, so the worker's task continues the run's trace.
    message, decided = sorted(tree.named("apply_async/durable.advance_run"), key=lambda span: span.start_time)
    assert tree.parent(message) is root and message.kind == SpanKind.PRODUCER
    assert decided.context.trace_id != trace_id  # the approval's decision sent the second message from its own
    consumer = tree.one("run/durable.advance_run")
    first, second = sorted(tree.named("advance test-traced"), key=lambda span: span.start_time)
    assert tree.parent(consumer) is message and tree.parent(first) is consumer
    assert tree.parent(second) is root and not second.links  # no message span here: straight under the root
    assert {span.context.trace_id for span in [*tree.children(first), *tree.children(second)]} == {trace_id}
    assert (first.attributes["durable.steps"], second.attributes["durable.steps"]) == (1, 2)
    assert second.attributes["durable.resuming"] is True

    # The worker's first task: plan, then approve, which waits.
    plan, approve_waits = tree.children(first)
    assert (plan.name, approve_waits.name) == ("step plan", "step approve")
    assert (plan.attributes["durable.visit"], plan.attributes["durable.visit_number"],
            plan.attributes["durable.attempt"], plan.attributes["durable.next_step"]) == (0, 1, 0, "approve")
    assert approve_waits.attributes["durable.step.outcome"] == "waiting"
    assert approve_waits.status.status_code == StatusCode.UNSET  # a wait is not an error
    [llm] = tree.children(plan)
    assert (llm.name, llm.attributes["durable.call_index"], llm.attributes["durable.reused"]) == \
           ("activity llm.plan", 0, False)
    [chat] = tree.children(llm)
    assert chat.name == f"chat {MODEL}" and chat.kind == SpanKind.CLIENT
    assert {key: chat.attributes[key] for key in chat.attributes if key.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}
    crm, wait = tree.children(approve_waits)
    assert (crm.name, crm.attributes["durable.reused"]) == ("activity crm.read", False)
    assert (wait.name, wait.attributes["durable.wait.kind"], wait.attributes["durable.wait.outcome"],
            wait.attributes["durable.wait.id"]) == ("wait approval", "approval", "waiting", str(request.id))

    # The second task: approve again (the same visit: its read reused, the approval now there), then pay.
    approve_again, pay = tree.children(second)
    assert (approve_again.name, approve_again.attributes["durable.visit"]) == ("step approve", 1)
    assert approve_again.attributes["durable.step.outcome"] == "done"
    crm_again, wait_again = tree.children(approve_again)
    assert (crm_again.name, crm_again.attributes["durable.reused"]) == ("activity crm.read", True)
    assert not tree.children(crm_again, f"chat {MODEL}")  # nothing asked again
    assert (wait_again.attributes["durable.wait.outcome"], wait_again.attributes["durable.wait.id"]) == \
           ("ready", str(request.id))
    [effect] = tree.children(pay, "side_effect refund")
    operation = SideEffect.objects.get(run=run)
    assert (effect.attributes["durable.operation_id"], effect.attributes["durable.action"],
            effect.attributes["durable.side_effect.outcome"], effect.attributes["durable.side_effect.sent"]) == \
           (operation.operation_id, "refund", "succeeded", True)
    [call] = tree.children(effect, "call probe")
    assert call.kind == SpanKind.CLIENT and call.attributes["durable.operation_id"] == operation.operation_id
    assert len(probe.calls) == 1
    if connection.vendor == "postgresql":  # psycopg's spans: the ledger's moves (STARTED, SUCCEEDED) under the effect
        statements = [span for span in tree.all_children(effect) if span.attributes.get("db.system") == "postgresql"]
        assert len(statements) >= 2 and {span.context.trace_id for span in statements} == {trace_id}


def test_a_side_effect_entered_again_after_a_crash_says_it_was_recorded_and_nothing_was_sent(traces, monkeypatch):
    run, _ = services.start_run(workflow="test-ledger-probe", input={"business_key": "B-7"}, business_key="B-7")
    crash_at(monkeypatch, AFTER_COMMIT, "charge")  # the worker dies after the commit, before the checkpoint
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    expire_lease(run)
    executor.advance(run.id)
    first, again = traces.tree().named("side_effect charge")
    operation = SideEffect.objects.get(run=run).operation_id
    assert (first.attributes["durable.operation_id"], first.attributes["durable.side_effect.sent"]) == \
           (operation, True)
    assert (again.attributes["durable.operation_id"], again.attributes["durable.side_effect.outcome"],
            again.attributes["durable.side_effect.sent"]) == (operation, "recorded", False)
    assert len(probe.calls) == 1


def test_a_forks_side_effect_spans_carry_the_operation_id_its_family_uses_in_the_ledger(traces, tmp_path):
    run, _ = services.start_run(workflow="test-ledger-probe", input={"business_key": "B-8"}, business_key="B-8")
    together, _ = services.start_run(workflow="test-parallel", input={
        "calls_file": str(tmp_path / "calls"), "delays": [0.0, 0.0], "effect": True}, business_key="P-8")
    forked = []
    for origin in (run, together):
        executor.advance(origin.id)
        forked.append(forks.fork_run(run_id=origin.id, seq=0, reason="again", user=None, source="api"))
        executor.advance(forked[-1].id)  # its side effect was done in the origin: answered from there, not sent
    tree = traces.tree()
    for origin, fork, span in ((run, forked[0], "side_effect charge"), (together, forked[1], "side_effect charge")):
        operation = SideEffect.objects.get(run=origin).operation_id
        [in_fork] = tree.named(span, **{"durable.run_id": str(fork.id)})
        assert (in_fork.attributes["durable.operation_id"], in_fork.attributes["durable.side_effect.outcome"],
                in_fork.attributes["durable.side_effect.sent"]) == (operation, "recorded", False)
    assert len(probe.calls) == 2  # one charge per origin, none from a fork


def test_a_visit_unwound_by_a_pause_before_its_first_call_says_paused_and_called_nothing(traces, tmp_path):
    run, _ = services.start_run(workflow="test-pause-gap", business_key="traced-pause",
                                input={"calls_file": str(tmp_path / "calls"), "pause_from_step": True})
    executor.advance(run.id)
    ask = traces.tree().one("step ask")
    assert ask.attributes["durable.step.outcome"] == "paused" and ask.status.status_code == StatusCode.UNSET
    assert not traces.tree().children(ask)  # no activity span: nothing was called


def test_a_worker_task_sent_from_another_trace_goes_under_the_run_and_links_the_message(traces):
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="T-1")
    with traces.tracer.start_as_current_span("run/durable.advance_run") as sweeper_message:
        executor.advance(run.id)
    tree = traces.tree()
    root, advance = tree.one("run test-trivial"), tree.one("advance test-trivial")
    assert tree.parent(advance) is root
    assert [link.context.span_id for link in advance.links] == [sweeper_message.get_span_context().span_id]


def test_a_step_a_route_leads_back_to_knows_which_visit_it_is(traces, tmp_path):
    run, _ = services.start_run(workflow="test-visit-loop", input={"calls_file": str(tmp_path / "calls"), "rounds": 3},
                                business_key="L-1")
    executor.advance(run.id)
    visits = traces.tree().named("step act")
    assert [span.attributes["durable.visit_number"] for span in visits] == [1, 2, 3]
    assert [span.attributes["durable.visit"] for span in visits] == [0, 1, 2]


def test_a_step_that_fails_marks_its_span_failed(traces, tmp_path):
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": str(tmp_path / "calls"),
                                                                 "fail_times": 1, "fail_kind": "final"},
                                business_key="F-1")
    executor.advance(run.id)
    failed = traces.tree().one("step s2")
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["durable.step.outcome"] == "error"
    assert failed.events[0].name == "exception"


def test_a_run_started_while_traces_were_off_has_no_trace_and_its_tasks_are_traced_on_their_own(traces):
    tracing.teardown()
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="T-2")
    assert run.trace_parent == "" and tracing.trace_id(run) is None
    tracing.setup(tracer_provider=traces.provider)
    executor.advance(run.id)
    advance = traces.tree().one("advance test-trivial")
    assert advance.parent is None and advance.attributes["durable.run_id"] == str(run.id)


def test_parallel_calls_each_have_their_span_under_the_visit_made_on_the_pool_or_reused(traces, tmp_path):
    run, _ = services.start_run(workflow="test-parallel", input={
        "calls_file": str(tmp_path / "calls"), "delays": [0.0, 0.05], "fail_first": {"c1": "retryable"},
        "effect": True}, business_key="P-1")
    executor.advance(run.id)  # c1 fails: the visit is retried, reusing c0 and the charge
    make_retry_due(Run.objects.get(id=run.id))
    executor.advance(run.id)
    assert Run.objects.get(id=run.id).status == RunStatus.SUCCEEDED
    tree = traces.tree()
    first, retried = tree.named("step gather")
    operation = SideEffect.objects.get(run=run).operation_id
    made = {span.name: span for span in tree.children(first)}
    assert set(made) == {"activity c0", "activity c1", "side_effect charge"}
    assert made["activity c1"].status.status_code == StatusCode.ERROR
    assert (made["side_effect charge"].attributes["durable.operation_id"],
            made["side_effect charge"].attributes["durable.side_effect.outcome"]) == (operation, "succeeded")
    assert [span.name for span in tree.children(made["side_effect charge"])] == ["call probe"]
    again = {span.name: span for span in tree.children(retried)}
    assert (again["activity c0"].attributes["durable.reused"], again["activity c1"].attributes["durable.reused"]) == \
           (True, False)
    assert (again["side_effect charge"].attributes["durable.operation_id"],
            again["side_effect charge"].attributes["durable.side_effect.outcome"],
            again["side_effect charge"].attributes["durable.side_effect.sent"]) == (operation, "recorded", False)


def test_a_model_call_told_of_after_its_activity_returned_is_that_activitys_and_took_its_time(traces):
    run, _ = services.start_run(workflow="test-traced-usage", input={}, business_key="U-1")
    executor.advance(run.id)
    tree = traces.tree()
    activity, chat = tree.one("activity llm.ask"), tree.one(f"chat {MODEL}")
    assert tree.parent(chat) is activity
    assert (chat.start_time, chat.end_time) == (activity.start_time, activity.end_time)
    assert (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"]) == (80, 12)


def test_a_wait_parks_the_run_or_finds_what_it_waited_for(traces):
    with pytest.raises(AwaitingApproval), traces.tracer.start_as_current_span("step wait"):
        with tracing.waiting("timer", until="2025-06-01T09:00:00Z"):
            raise AwaitingApproval("T-1")  # control flow, not an Exception: the run parks
    with tracing.waiting("event", id="paid:ORD-9"):
        pass
    tree = traces.tree()
    parked, ready = tree.one("wait timer"), tree.one("wait event")
    assert tree.parent(parked) is tree.one("step wait") and parked.status.status_code == StatusCode.UNSET
    assert (parked.attributes["durable.wait.outcome"], parked.attributes["durable.wait.until"],
            parked.attributes["durable.wait.id"]) == ("waiting", "2025-06-01T09:00:00Z", "T-1")
    assert (ready.attributes["durable.wait.outcome"], ready.attributes["durable.wait.id"]) == ("ready", "paid:ORD-9")


def test_a_timer_an_event_and_a_child_each_have_their_wait_span(traces, tmp_path):
    calls = str(tmp_path / "calls")
    sleeper, _ = services.start_run(workflow="test-sleep", input={"calls_file": calls}, business_key="T-1")
    listener, _ = services.start_run(workflow="test-wait-event", input={"calls_file": calls, "seconds": 0},
                                     business_key="T-2")
    parent, _ = services.start_run(workflow="test-parent", input={"calls_file": calls}, business_key="T-3")
    for run in (sleeper, listener, parent):
        executor.advance(run.id)
    waits = {span.attributes["durable.wait.kind"]: span.attributes["durable.wait.outcome"]
             for span in traces.tree().spans if span.name.startswith("wait ")}
    assert waits == {"timer": "waiting", "event": "waiting", "child": "waiting"}
