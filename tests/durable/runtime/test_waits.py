"""Waits (docs/workflows.md, "Timers, events and child runs"): a run parks on a timer, an event or child runs
without holding a worker, the database's clock, the event or the child's end wakes it, and the visit re-executed
returns what the wait recorded; events are kept until consumed and consumed once; a child starts once."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from durable import send_event, services
from durable.engine.errors import LeaseLost
from durable.engine.states import RunStatus
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import JournalEntry, OperatorAction, Run, RunEvent
from durable.runtime import wakes
from durable.store import base, postgres
from tests.conftest import user_with_roles
from tests.durable.claims import advance
from tests.durable.ledger_workflows import SimulatedCrash, expire_lease
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db(transaction=True)


def start(workflow: str, tmp_path, key: str = "W-1", **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input={"calls_file": str(tmp_path / "calls"), **given},
                                business_key=key)
    return run


def make_due(run: Run) -> None:
    """The database's clock passes the run's due time (the run's wait keeps its own copy of it)."""
    run.refresh_from_db()
    past = timezone.now() - timedelta(seconds=1)
    waiting_for = {**run.waiting_for, "until": past.isoformat()}
    Run.objects.filter(id=run.id).update(next_attempt_at=past, waiting_for=waiting_for)


def kinds(run: Run) -> list[str]:
    return list(JournalEntry.objects.filter(run=run).exclude(kind=JournalEntry.Kind.ACTIVITY)
                .order_by("created_at", "id").values_list("kind", flat=True))


# -- Timers ------------------------------------------------------------------------------------------------------

def test_a_sleeping_run_is_parked_with_its_due_time_and_holds_no_lease(tmp_path):
    before = timezone.now()
    run = advance(start("test-sleep", tmp_path, seconds=3600))
    assert run.status == RunStatus.WAITING
    assert run.lease_owner is None and run.lease_expires_at is None
    assert run.waiting_for["kind"] == "timer" and run.waiting_for["step"] == "remind"
    assert before + timedelta(seconds=3600) <= run.next_attempt_at <= timezone.now() + timedelta(seconds=3600)
    assert run.waiting_for["until"] == run.next_attempt_at.isoformat()
    assert advance(run).status == RunStatus.WAITING  # a message for it changes nothing: it is not claimable
    assert wakes.wake_due() == []  # not due


def test_a_due_timer_wakes_the_run_and_the_visit_goes_on_without_asking_again(tmp_path):
    run = advance(start("test-sleep", tmp_path, seconds=3600))
    make_due(run)
    assert wakes.wake_due() == [run.id]
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(tmp_path / "calls") == ["before", "after"]  # "before" was reused, not called again
    assert kinds(run)[:2] == [JournalEntry.Kind.WAIT, JournalEntry.Kind.ACTIVITY_REUSED]
    ended = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.WAIT_ENDED)
    assert ended.detail["timer"] == "fired"


def test_a_run_woken_before_its_timer_is_due_parks_again_with_the_same_due_time(tmp_path):
    """Whatever woke it (a skewed clock, an operator), the database's clock decides: the due time is kept."""
    run = advance(start("test-sleep", tmp_path, seconds=3600))
    due = run.next_attempt_at
    Run.objects.filter(id=run.id).update(status=RunStatus.PENDING, next_attempt_at=None)
    run = advance(run)
    assert run.status == RunStatus.WAITING and run.next_attempt_at == due
    assert calls_in(tmp_path / "calls") == ["before"]


def test_a_fired_timer_is_recorded_so_a_crash_after_it_does_not_sleep_again(tmp_path, monkeypatch):
    run = advance(start("test-sleep", tmp_path, seconds=3600))
    make_due(run)
    wakes.wake_due()
    store = postgres.PostgresRunStore if _on_postgres() else base.RunStore
    real_finish, crashed = store.finish, []

    def finish(self, *args, **kwargs):
        if not crashed:
            crashed.append(True)
            raise SimulatedCrash()
        return real_finish(self, *args, **kwargs)

    monkeypatch.setattr(store, "finish", finish)
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error  # not parked again: the timer's firing was recorded
    assert calls_in(tmp_path / "calls") == ["before", "after"]


def test_a_sleeping_run_can_be_cancelled(tmp_path, operator):
    run = advance(start("test-sleep", tmp_path, seconds=3600))
    report = services.cancel_run(run_id=run.id, user=operator, source="api")
    assert report.run.status == RunStatus.CANCELLED
    assert wakes.wake_due() == []


# -- Events ------------------------------------------------------------------------------------------------------

def test_an_event_sent_before_the_run_waits_is_kept_and_consumed_when_it_does(tmp_path):
    run = start("test-wait-event", tmp_path, seconds=0)
    delivery = send_event(run_id=run.id, name="reply", payload={"text": "yes"}, sender="test")
    assert delivery.created and not delivery.woke  # PENDING: nothing to wake, the event waits in the mailbox
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "yes"}]]
    event = RunEvent.objects.get(id=delivery.event.id)
    assert event.consumed_at is not None and (event.consumed_step, event.consumed_visit) == ("listen", 0)


def test_an_event_wakes_the_run_waiting_for_it(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=0))
    assert run.status == RunStatus.WAITING and run.waiting_for["events"] == ["reply"]
    assert run.next_attempt_at is None  # no deadline: only the event wakes it
    other = send_event(run_id=run.id, name="unrelated", payload=1)
    assert not other.woke
    delivery = send_event(run_id=run.id, name="reply", payload={"text": "yes"})
    assert delivery.woke
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "yes"}]]
    assert calls_in(tmp_path / "calls") == ["before"]
    assert not RunEvent.objects.get(id=other.event.id).consumed_at  # kept: nothing waited for it


def test_ten_events_in_one_burst_are_each_consumed_once_in_arrival_order(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=0, events=10))
    for n in range(10):
        send_event(run_id=run.id, name="reply", payload={"n": n})
    for _ in range(12):
        run = advance(run)
        if run.status != RunStatus.PENDING:
            break
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert [payload["n"] for _, payload in run.output["received"]] == list(range(10))
    assert RunEvent.objects.filter(run=run, consumed_at__isnull=True).count() == 0
    assert RunEvent.objects.filter(run=run).count() == 10


def test_the_same_event_sent_five_times_with_one_key_is_one_event(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=0, events=2))
    deliveries = [send_event(run_id=run.id, name="reply", payload={"text": "hi"}, idempotency_key="hook-1")
                  for _ in range(5)]
    assert [d.created for d in deliveries] == [True, False, False, False, False]
    assert len({d.event.id for d in deliveries}) == 1
    with pytest.raises(Conflict, match="another event name or payload"):
        send_event(run_id=run.id, name="reply", payload={"text": "other"}, idempotency_key="hook-1")
    run = advance(run)
    assert run.status == RunStatus.WAITING  # one event consumed, the second wait goes on waiting
    assert run.waiting_for["call_index"] == 2


def test_the_first_of_several_names_is_taken(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=0, names=["approved", "declined"]))
    send_event(run_id=run.id, name="declined", payload={"why": "no"})
    run = advance(run)
    assert run.output["received"] == [["declined", {"why": "no"}]]


def test_a_wait_whose_deadline_passes_returns_a_timeout_the_step_handles(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=3600))
    assert run.next_attempt_at is not None
    make_due(run)
    assert wakes.wake_due() == [run.id]
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == ["timeout"]
    with pytest.raises(Conflict, match="ended"):  # a late event for an ended run is refused
        send_event(run_id=run.id, name="reply", payload={})


def test_a_crash_after_consuming_an_event_loses_nothing_and_takes_nothing_twice(tmp_path, monkeypatch):
    run = advance(start("test-wait-event", tmp_path, seconds=0, events=1))
    first = send_event(run_id=run.id, name="reply", payload={"n": 1})
    second = send_event(run_id=run.id, name="reply", payload={"n": 2})
    store = postgres.PostgresRunStore if _on_postgres() else base.RunStore
    real_finish, crashed = store.finish, []

    def finish(self, *args, **kwargs):
        if not crashed:
            crashed.append(True)
            raise SimulatedCrash()  # the event is consumed and recorded; the checkpoint is not written
        return real_finish(self, *args, **kwargs)

    monkeypatch.setattr(store, "finish", finish)
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"n": 1}]]  # the same event, from the visit's record
    assert RunEvent.objects.get(id=first.event.id).consumed_at is not None
    assert RunEvent.objects.get(id=second.event.id).consumed_at is None  # still in the mailbox, for a later wait


def test_a_worker_that_lost_its_lease_consumes_nothing(tmp_path):
    run = advance(start("test-wait-event", tmp_path, seconds=0))
    send_event(run_id=run.id, name="reply", payload={"n": 1})
    store = base.RunStore()
    lease, _ = store.claim(run.id, "worker-a", 10)
    Run.objects.filter(id=run.id).update(fencing_token=lease.token + 1)  # another worker took it over
    with pytest.raises(LeaseLost):
        store.take_event_or_park(lease, "listen", 1, "durable.wait_for_event", ("reply",), {}, None)
    assert RunEvent.objects.get(run=run).consumed_at is None


def test_an_event_by_business_key_reaches_the_active_run(tmp_path):
    run = advance(start("test-wait-event", tmp_path, key="ORDER-7", seconds=0))
    delivery = send_event(workflow="test-wait-event", business_key="ORDER-7", name="reply", payload={"k": 1})
    assert delivery.event.run_id == run.id and delivery.woke


def test_events_refused_with_the_reason(tmp_path, viewer):
    run = advance(start("test-wait-event", tmp_path, key="K-1", seconds=0))
    with pytest.raises(InvalidInput) as bad_name:
        send_event(run_id=run.id, name="no spaces", payload={})
    assert "name" in bad_name.value.errors
    with pytest.raises(InvalidInput) as unstorable:
        send_event(run_id=run.id, name="reply", payload={"text": "nul\x00"})
    assert "payload" in unstorable.value.errors
    with pytest.raises(InvalidInput) as by_model:
        send_event(run_id=run.id, name="rated", payload={"rating": "lots"})
    assert set(by_model.value.errors) == {"payload.text", "payload.rating"}
    with pytest.raises(Run.DoesNotExist):
        send_event(workflow="test-wait-event", business_key="NO-SUCH-KEY", name="reply")
    with pytest.raises(Forbidden):
        send_event(run_id=run.id, name="reply", user=viewer)
    start("test-wait-event", tmp_path, key="K-1", seconds=0)  # the workflow allows a second active run per key
    with pytest.raises(Conflict) as several:
        send_event(workflow="test-wait-event", business_key="K-1", name="reply")
    assert len(several.value.extra["runs"]) == 2
    assert RunEvent.objects.count() == 0  # nothing half-written


def test_an_event_is_audited_with_its_sender_and_shown_on_the_timeline(tmp_path, operator):
    run = advance(start("test-wait-event", tmp_path, seconds=0))
    send_event(run_id=run.id, name="reply", payload={}, user=operator, source="api")
    action = OperatorAction.objects.get(run=run, action="send_event")
    assert action.actor == operator and action.status_after == RunStatus.PENDING
    received = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.EVENT_RECEIVED)
    assert received.detail["sender"] == f"api:{operator.username}" and received.detail["woke_run"]


# -- Child runs --------------------------------------------------------------------------------------------------

def test_a_parent_waits_for_its_children_and_gets_their_outputs(tmp_path):
    parent = advance(start("test-parent", tmp_path, children=2))
    assert parent.status == RunStatus.WAITING and parent.waiting_for["kind"] == "child"
    children = list(Run.objects.filter(parent_run=parent).order_by("business_key"))
    assert [c.business_key for c in children] == ["child-0", "child-1"]
    advance(children[0])
    parent.refresh_from_db()
    assert parent.status == RunStatus.PENDING  # a child's end wakes it: it looks at all of them again
    parent = advance(parent)
    assert parent.status == RunStatus.WAITING  # the second child has not ended
    advance(children[1])
    parent = advance(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    assert parent.output["outputs"] == [{"doubled": 0}, {"doubled": 2}]
    assert calls_in(tmp_path / "calls") == ["before"]
    assert Run.objects.filter(parent_run=parent).count() == 2


def test_a_failed_child_raises_in_the_parent_with_its_status_and_error(tmp_path):
    parent = advance(start("test-parent", tmp_path, child_fails=True, catch_child_failure=True))
    advance(Run.objects.get(parent_run=parent))
    parent = advance(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    assert parent.output["child_error"].startswith("FAILED: child run") and "refuses" in parent.output["child_error"]


def test_a_parent_killed_after_starting_its_child_finds_the_same_child(tmp_path, monkeypatch):
    run = start("test-parent", tmp_path)
    store = postgres.PostgresRunStore if _on_postgres() else base.RunStore
    real, crashed = store.record_child, []

    def record_child(self, *args, **kwargs):
        if not crashed:
            crashed.append(True)
            raise SimulatedCrash()  # the child run exists; the parent's record of it does not
        return real(self, *args, **kwargs)

    monkeypatch.setattr(store, "record_child", record_child)
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.WAITING
    assert Run.objects.filter(parent_run=run).count() == 1  # exactly one child


def test_cancelling_a_parent_cancels_its_unfinished_children_and_says_so(tmp_path, operator):
    parent = advance(start("test-parent", tmp_path, children=2, child_waits=True))
    children = list(Run.objects.filter(parent_run=parent))
    advance(children[0])  # waits for its "go" event
    report = services.cancel_run(run_id=parent.id, user=operator, source="api")
    assert {c.status for c in Run.objects.filter(parent_run=parent)} == {RunStatus.CANCELLED}
    assert "child run" in report.summary() and str(children[0].id) in report.summary()
    assert OperatorAction.objects.filter(action="cancel", run__in=children).count() == 2


def test_cancelling_a_child_wakes_its_parent_with_the_child_cancelled(tmp_path, operator):
    parent = advance(start("test-parent", tmp_path, child_waits=True, catch_child_failure=True))
    services.cancel_run(run_id=Run.objects.get(parent_run=parent).id, user=operator, source="api")
    parent.refresh_from_db()
    assert parent.status == RunStatus.PENDING
    parent = advance(parent)
    assert parent.output["child_error"].startswith("CANCELLED")


# -- Waking on time ----------------------------------------------------------------------------------------------

def test_a_short_timer_is_armed_by_the_worker_that_parks_it_and_wakes_without_a_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(wakes, "arm_on_park", True)  # as in a Celery worker (durable.runtime.worker)
    run = advance(start("test-sleep", tmp_path, seconds=0.3))
    assert run.status == RunStatus.WAITING
    assert wakes.arm_timers(5.0) == 0  # armed already, as it was parked
    _woken(run)
    assert advance(run).status == RunStatus.SUCCEEDED


def test_the_sweeping_worker_arms_the_timers_due_before_its_next_sweep(tmp_path):
    run = advance(start("test-sleep", tmp_path, seconds=0.3))
    assert wakes.arm_timers(5.0) == 1
    assert wakes.arm_timers(5.0) == 0  # armed once
    _woken(run)


def _woken(run: Run) -> None:
    deadline = timezone.now() + timedelta(seconds=10)
    while timezone.now() < deadline and Run.objects.get(id=run.id).status == RunStatus.WAITING:
        pass
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


def _on_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


@pytest.fixture
def viewer(db) -> User:
    return user_with_roles("waits-viewer", "viewer")


@pytest.fixture
def operator(db) -> User:
    return user_with_roles("waits-operator", "operator")


def test_a_child_run_is_created_by_whoever_created_its_parent_so_it_stays_in_the_parents_scope(tmp_path):
    tool = User.objects.create(username="durable-tool-drill-1")
    run, _ = services.start_run(workflow="test-parent", input={"calls_file": str(tmp_path / "calls")},
                                business_key="P-1", user=tool)
    advance(run)
    assert Run.objects.get(parent_run=run).created_by == tool


def test_a_child_key_another_parents_child_holds_is_refused_not_shared(tmp_path):
    """test-child allows one active run per business key: a second parent asking for the same key does not get
    (and could not cancel) the first parent's child; the step fails, naming the key and the way out."""
    first = advance(start("test-parent", tmp_path, key="P-1", child_waits=True))
    second = advance(start("test-parent", tmp_path, key="P-2", child_waits=True))
    assert first.status == RunStatus.WAITING
    assert second.status == RunStatus.FAILED and second.error["kind"] == "child_not_started"
    assert "business key of its own" in second.error["message"]
    assert Run.objects.filter(workflow_name="test-child").count() == 1


def test_the_tokens_a_child_run_used_count_in_its_parents_total(tmp_path, operator):
    from decimal import Decimal

    from durable.budgets import with_children
    from tests.durable.console.screens import client_for

    parent = advance(start("test-parent", tmp_path, children=2))
    assert with_children(parent) is not None and with_children(parent).spent.tokens == 0
    children = list(Run.objects.filter(parent_run=parent))
    Run.objects.filter(id=children[0].id).update(input_tokens=100, output_tokens=20, cost=Decimal("0.5"))
    Run.objects.filter(id=children[1].id).update(input_tokens=1, output_tokens=2, unpriced_tokens=3)
    Run.objects.filter(id=parent.id).update(input_tokens=1000, output_tokens=10, cost=Decimal("1"))
    parent.refresh_from_db()
    delegated = with_children(parent)
    assert (delegated.spent.tokens, delegated.spent.cost, delegated.spent.unpriced_tokens, delegated.runs) == (
        1133, Decimal("1.5"), 3, 2)
    api = client_for(operator)
    detail = api.get(f"/api/runs/{parent.id}/").json()
    assert detail["spending_with_children"]["tokens"] == 1133 and detail["spending_with_children"]["runs"] == 2
    assert api.get(f"/api/runs/{children[0].id}/").json()["spending_with_children"] is None
    page = api.get(f"/runs/{parent.id}/").content.decode()
    assert "With its child runs" in page and "2 runs it delegated to" in page


def test_a_wait_for_an_event_its_workflow_does_not_declare_fails_the_run_saying_so(tmp_path):
    # The API would refuse such an event (400), so the wait could never end: the step is refused instead.
    run = advance(start("test-wait-event", tmp_path, seconds=0, names=["reply", "never-declared"]))
    assert run.status == RunStatus.FAILED
    assert run.error["kind"] == "undeclared_event"
    assert "'never-declared'" in run.error["message"] and "'rated'" in run.error["message"]
