"""Named limits on calls (docs/workflows.md, "Limits and priority"), advanced in this process: a call takes room
before it goes out and gives it back after; a call without room parks its run (WAITING, kind `limit`) holding no
lease; room that frees wakes the waiters in priority then arrival order, and is kept for them; a 429 with
Retry-After pauses the whole limit; a slot never outlives the lease that took it."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from durable import services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, LimitGate, LimitTicket, LimitUse, Run
from durable.runtime import limits, wakes
from durable.runtime.heartbeat import pooled
from durable.store import limits as rows
from tests.durable.claims import advance
from tests.durable.limit_workflows import during_call, starts_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_at_a_time(settings):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 1}}


@pytest.fixture(autouse=True)
def _no_hooks():
    yield
    during_call.clear()


def start(calls_file: str, key: str, priority: int = 0, **given) -> Run:
    run, _ = services.start_run(workflow="test-limited", input={"calls_file": calls_file, **given}, business_key=key,
                                priority=priority)
    return run


def status(run: Run) -> str:
    run.refresh_from_db()
    return run.status


def labels(calls_file: str) -> list[str]:
    return [label for _, label in starts_in(calls_file)]


def test_a_call_takes_a_slot_and_gives_it_back(one_at_a_time, calls_file):
    seen = []
    during_call.append(lambda: seen.append(list(LimitTicket.objects.values_list("state", flat=True))))
    run = advance(start(calls_file, "A", calls=2))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert seen == [["HELD"], ["HELD"]]  # in flight, the call held the slot
    assert not LimitTicket.objects.exists()  # and gave it back after


def test_a_call_without_room_parks_its_run_holding_no_lease_and_is_woken_when_the_slot_frees(
        one_at_a_time, calls_file):
    waiter = start(calls_file, "B")
    parked = []
    during_call.append(lambda: parked.append(advance(waiter)) if not parked else None)
    holder = advance(start(calls_file, "A"))
    assert holder.status == RunStatus.SUCCEEDED
    blocked = parked[0]  # advanced while A's call held the only slot
    assert blocked.waiting_for["kind"] == "limit" and blocked.waiting_for["limit"] == "test-limit"
    assert blocked.lease_owner is None
    assert JournalEntry.objects.filter(run=waiter, kind=JournalEntry.Kind.WAIT).exists()
    # A's call gave the slot back: B was granted it and woken.
    assert status(waiter) == RunStatus.PENDING
    assert LimitTicket.objects.get(run=waiter).state == "GRANTED"
    during_call.clear()
    assert advance(waiter).status == RunStatus.SUCCEEDED
    assert labels(calls_file) == ["A:0", "B:0"]  # B's call went out once, after A's


def test_waiters_are_woken_by_priority_then_arrival_and_keep_the_room_they_were_given(one_at_a_time, calls_file):
    low_first, high, low_second = (start(calls_file, "low-1"), start(calls_file, "high", priority=5),
                                   start(calls_file, "low-2"))
    queued = []

    def park_the_others() -> None:
        if not queued:
            queued.extend(advance(run) for run in (low_first, high, low_second))

    during_call.append(park_the_others)
    advance(start(calls_file, "holder"))
    during_call.clear()
    assert [run.status for run in queued] == [RunStatus.WAITING] * 3
    assert [status(low_first), status(high), status(low_second)] == [RunStatus.WAITING, RunStatus.PENDING,
                                                                      RunStatus.WAITING]
    newcomer = advance(start(calls_file, "newcomer", priority=100))
    assert newcomer.status == RunStatus.WAITING  # the room is kept for the woken run, whatever the newcomer's rank
    assert advance(high).status == RunStatus.SUCCEEDED
    assert [status(low_first), status(newcomer), status(low_second)] == [RunStatus.WAITING, RunStatus.PENDING,
                                                                          RunStatus.WAITING]
    for run in (newcomer, low_first, low_second):
        assert advance(run).status == RunStatus.SUCCEEDED
    assert labels(calls_file) == ["holder:0", "high:0", "newcomer:0", "low-1:0", "low-2:0"]


def test_a_run_woken_from_a_limit_reuses_the_calls_it_recorded_before_it(settings, calls_file):
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "1/h"}}
    run = advance(start(calls_file, "A", calls=2))
    assert run.status == RunStatus.WAITING and run.waiting_for["call_index"] == 1
    assert run.next_attempt_at > timezone.now() + timedelta(minutes=59)  # when the window frees the room
    LimitUse.objects.update(started_at=timezone.now() - timedelta(hours=2))  # an hour passes
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))  # due
    assert wakes.wake_due() == [run.id]
    assert advance(run).status == RunStatus.SUCCEEDED
    assert labels(calls_file) == ["A:0", "A:1"]  # the first call was reused, not made again


def test_a_429_with_retry_after_pauses_the_whole_limit_and_the_run_retries(settings, calls_file, tmp_path):
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "100/s"}}
    fail = tmp_path / "fail"
    fail.touch()
    asked = advance(start(calls_file, "A", fail_file=str(fail), retry_after=30))
    assert asked.status == RunStatus.WAITING_RETRY and asked.error["kind"] == "rate_limited"  # it retries as today
    paused_until = LimitGate.objects.get(limit="test-limit", key="").paused_until
    assert timezone.now() + timedelta(seconds=25) < paused_until <= timezone.now() + timedelta(seconds=30)
    other = advance(start(calls_file, "B"))  # another run: the limit is paused for it too
    assert other.status == RunStatus.WAITING and other.next_attempt_at == paused_until
    assert labels(calls_file) == ["A:0"]


def test_tokens_reported_by_a_call_hold_new_calls_until_the_window_frees_them(settings, calls_file):
    settings.DURABLE_LIMITS = {"test-limit": {"tokens": "100/m"}}
    assert advance(start(calls_file, "A", tokens=150)).status == RunStatus.SUCCEEDED
    assert LimitUse.objects.get().tokens == 150
    waiting = advance(start(calls_file, "B", tokens=10))
    assert waiting.status == RunStatus.WAITING
    started = LimitUse.objects.get().started_at
    assert waiting.next_attempt_at == started + timedelta(seconds=60)


def test_a_slot_is_freed_when_the_lease_that_took_it_is_gone(one_at_a_time, calls_file, monkeypatch):
    """A worker that died mid-call leaves its slot; the run's next claim (a new fencing token) frees it."""
    holder = start(calls_file, "A")
    taken = []

    def die_holding_it() -> None:
        taken.append(list(LimitTicket.objects.values_list("state", "token")))
        raise SystemExit  # the process dies mid-call: nothing is given back

    during_call.append(die_holding_it)
    with monkeypatch.context() as dying:
        dying.setattr(rows, "give_back", lambda *args: None)  # a dead process gives nothing back
        with pytest.raises(SystemExit):
            advance(holder)
    during_call.clear()
    holder.refresh_from_db()
    assert holder.status == RunStatus.RUNNING and taken == [[("HELD", holder.fencing_token)]]
    assert advance(start(calls_file, "B")).status == RunStatus.WAITING  # the dead worker's lease still holds it
    Run.objects.filter(id=holder.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert advance(holder).status == RunStatus.SUCCEEDED  # claimed again: the old slot no longer counts
    assert labels(calls_file) == ["A:0", "A:0"]


def test_a_run_waiting_on_a_limit_can_be_cancelled_and_its_place_is_dropped(one_at_a_time, calls_file, operator):
    waiter = start(calls_file, "B")

    def park_and_cancel() -> None:
        if status(waiter) == RunStatus.PENDING:
            assert advance(waiter).status == RunStatus.WAITING
            services.cancel_run(run_id=waiter.id, user=operator, source="api", reason="not needed")

    during_call.append(park_and_cancel)
    advance(start(calls_file, "A"))
    during_call.clear()
    assert status(waiter) == RunStatus.CANCELLED
    assert not LimitTicket.objects.exists()  # A's slot given back found no one to wake: B's place was dropped
    assert advance(start(calls_file, "C")).status == RunStatus.SUCCEEDED


def test_room_granted_to_a_run_cancelled_before_it_took_it_is_free_again(one_at_a_time, calls_file, operator):
    waiter = start(calls_file, "B")
    during_call.append(lambda: advance(waiter) if status(waiter) == RunStatus.PENDING else None)
    advance(start(calls_file, "A"))
    during_call.clear()
    assert status(waiter) == RunStatus.PENDING  # woken with the slot kept for it
    services.cancel_run(run_id=waiter.id, user=operator, source="api", reason="not needed")
    assert advance(start(calls_file, "C")).status == RunStatus.SUCCEEDED


def test_a_call_naming_an_undeclared_limit_fails_for_good_saying_so(settings, calls_file):
    settings.DURABLE_LIMITS = {}
    run = advance(start(calls_file, "A", limit="nowhere"))
    assert run.status == RunStatus.FAILED
    assert run.error["kind"] == "limit_not_declared" and "'nowhere'" in run.error["message"]
    assert not Path(calls_file).exists()


def test_calls_at_once_take_room_each_and_send_what_fits_one_after_the_other(one_at_a_time, calls_file):
    run = advance(start(calls_file, "A", calls=3, together=True))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(labels(calls_file)) == ["A:0", "A:1", "A:2"]
    assert not LimitTicket.objects.filter(state="HELD").exists()


def test_calls_at_once_park_the_run_when_none_is_in_flight_and_what_answered_is_reused(settings, calls_file):
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "1/h"}}
    run = advance(start(calls_file, "A", calls=2, together=True))
    assert run.status == RunStatus.WAITING and run.waiting_for["kind"] == "limit"  # the first answered, then no room
    LimitUse.objects.update(started_at=timezone.now() - timedelta(hours=2))  # an hour passes
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert wakes.wake_due() == [run.id]
    assert advance(run).status == RunStatus.SUCCEEDED
    assert labels(calls_file) == ["A:0", "A:1"]  # the first call was reused, not made again


def test_a_limit_per_business_key_counts_each_key_apart(settings, calls_file):
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 1, "per": "business_key"}}
    other = start(calls_file, "B")
    seen = []

    def advance_the_other() -> None:
        if not seen:
            seen.append("advanced")
            seen.append(advance(other).status)

    during_call.append(advance_the_other)
    assert advance(start(calls_file, "A")).status == RunStatus.SUCCEEDED
    assert seen == ["advanced", RunStatus.SUCCEEDED]  # B's call did not wait for A's: another key


def test_what_each_limit_holds_is_read_for_the_console_and_the_metrics(one_at_a_time, calls_file):
    waiter = start(calls_file, "B")
    seen = []
    during_call.append(lambda: (advance(waiter), seen.append(rows.use_by_key(10.0))) if not seen else None)
    advance(start(calls_file, "A"))
    during_call.clear()
    assert [(row.limit, row.in_use, row.waiting) for row in seen[0]] == [("test-limit", 1, 1)]


def test_metrics_say_each_limits_use_its_waiting_runs_and_how_often_it_was_full(one_at_a_time, calls_file, settings):
    settings.DURABLE_METRICS_TOKEN = "scrape-secret"

    def scraped() -> dict[tuple[str, str], float]:
        page = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").content.decode()
        return {(sample.name, sample.labels.get("limit", "")): sample.value
                for family in text_string_to_metric_families(page) for sample in family.samples}

    throttled_before = scraped().get(("limit_throttled_total", "test-limit"), 0.0)
    waiter = start(calls_file, "B")
    seen = []
    during_call.append(lambda: (advance(waiter), seen.append(scraped())) if not seen else None)
    advance(start(calls_file, "A"))
    during_call.clear()
    assert seen[0][("limit_in_use", "test-limit")] == 1 and seen[0][("limit_waiting_runs", "test-limit")] == 1
    assert seen[0][("limit_throttled_total", "test-limit")] == throttled_before + 1
    after = scraped()
    assert after[("limit_in_use", "test-limit")] == 1  # the room kept for B, woken to take it
    assert after[("limit_waiting_runs", "test-limit")] == 0


@pytest.mark.parametrize("together", [False, True], ids=["one-by-one", "parallel"])
def test_a_call_that_would_leave_past_the_rates_margin_takes_a_new_start_first(settings, calls_file, caplog,
                                                                               together):
    # A margin of a microsecond: every call is later than that after its recorded start, and so is every new start
    # it takes; after RETAKES of them it is sent, with a warning that the margin is too small for the process.
    settings.DURABLE_LIMITS = {"test-limit": {"concurrency": 2, "rate": "100/s"}}
    settings.DURABLE_LIMIT_RATE_MARGIN_SECONDS = 0.000001
    settings.DURABLE_METRICS_TOKEN = "scrape-secret"

    def retaken() -> float:
        page = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").content.decode()
        return sum(sample.value for family in text_string_to_metric_families(page) for sample in family.samples
                   if sample.name == "limit_start_retaken_total" and sample.labels.get("limit") == "test-limit")

    before = retaken()
    in_flight = []
    during_call.append(lambda: in_flight.append(LimitUse.objects.count()))
    run = advance(start(calls_file, "A", calls=2, together=together))
    assert run.status == RunStatus.SUCCEEDED, run.error  # its own slot did not stop it taking a new start
    assert LimitUse.objects.count() == 2  # one start a call: each retake replaced the one before it
    assert max(in_flight) <= 2 and retaken() == before + 2
    assert sorted(labels(calls_file)) == ["A:0", "A:1"]
    assert caplog.text.count("DURABLE_LIMIT_RATE_MARGIN_SECONDS") == 2


def test_a_call_on_a_limit_without_a_margin_is_sent_as_it_took_its_start(settings, calls_file):
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "100/s"}}
    settings.DURABLE_LIMIT_RATE_MARGIN_SECONDS = 0
    used = []
    during_call.append(lambda: used.append(list(LimitUse.objects.values_list("id", flat=True))))
    assert advance(start(calls_file, "A", calls=2)).status == RunStatus.SUCCEEDED
    assert used[1][:1] == used[0]  # the first call's start was kept, not taken again


def test_a_call_waits_for_its_processs_turn_at_the_gate_holding_no_pooled_connection(settings, calls_file,
                                                                                       monkeypatch):
    # The step's write before the call is read and its connection given back first: threads queued for the turn
    # leave the pool's connections to the calls that answered (invariant 21).
    settings.DURABLE_LIMITS = {"test-limit": {"rate": "100/s"}}
    holding = []
    turn = limits.turns.turn

    def spied(name: str, key: str):
        holding.append(pooled() and connection.connection is not None)
        return turn(name, key)

    monkeypatch.setattr(limits.turns, "turn", spied)
    assert advance(start(calls_file, "A", calls=2)).status == RunStatus.SUCCEEDED
    assert holding == [False, False]
