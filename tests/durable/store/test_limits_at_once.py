"""A named limit's common case in one statement (durable_limit_take, Postgres): room read and taken under the gate
row when nobody waits in line; nothing taken, and why, otherwise; a late call's start re-taken in its place. The
portable path (durable/store/limits.py's lock, held_now, take) is tests/durable/store/test_limits.py's."""
from datetime import timedelta

import pytest
from django.db import connection, transaction

from durable.engine.call_limits import LimitSpec, Rate, admits, frees_at
from durable.engine.states import RunStatus
from durable.models import LimitTicket, LimitUse, Run
from durable.store import limits as rows
from tests.durable.store.test_limits import running_run

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = LimitSpec("l", concurrency=2, rate=Rate(3, 1.0), tokens=Rate(100, 60.0))


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("SQLite takes a limit's room through the portable path (one writer at a time already)")


def take(run: Run, call: str, spec: LimitSpec = SPEC, **given) -> rows.AtOnce:
    return rows.take_at_once(spec, "", run.id, call, run.fencing_token, 0, 10.0, **given)


def test_room_is_read_and_taken_in_one_statement_as_the_portable_path_counts_it():
    run = running_run()
    first = take(run, "0.0")
    assert first.taken and not first.in_line and first.started is not None and first.started >= first.held.now
    ticket = LimitTicket.objects.get(id=first.slot)
    assert (ticket.state, ticket.token, ticket.run_id) == ("HELD", 4, run.id)
    assert LimitUse.objects.get(id=first.use).started_at == first.started
    second = take(run, "0.1")
    assert second.taken and second.held.in_use == 1 and len(second.held.starts) == 1
    full = take(run, "0.2")  # two slots held: concurrency full
    assert not full.taken and not full.in_line and full.slot is None and full.use is None
    assert full.held.in_use == 2 and admits(SPEC, full.held) == 0
    with transaction.atomic():  # the portable path reads the same
        gate, at = rows.lock("l", "")
        held, _ = rows.held_now(SPEC, gate, at, 10.0)
    assert (held.in_use, len(held.starts)) == (2, 2)


def test_a_full_rate_says_when_its_window_frees_room():
    run = running_run()
    spec = LimitSpec("l", rate=Rate(2, 1.0))
    starts = [take(run, f"0.{n}", spec).started for n in range(2)]
    full = take(run, "0.2", spec)
    assert not full.taken and full.held.starts == tuple(starts)
    assert frees_at(spec, full.held) == starts[0] + timedelta(seconds=1.0 + spec.margin)


def test_runs_waiting_in_line_or_the_calls_own_ticket_leave_the_choice_to_the_runtime():
    run, waiter = running_run("A"), running_run("B")
    with transaction.atomic():
        gate, at = rows.lock("l", "")
        rows.queue(waiter.id, gate, "0.0", 0, at)
    queued = take(run, "0.0")
    assert not queued.taken and queued.in_line and LimitUse.objects.count() == 0
    LimitTicket.objects.filter(run=waiter).delete()
    with transaction.atomic():
        gate, at = rows.lock("l", "")
        rows.queue(run.id, gate, "0.0", 0, at)
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING)
    own = take(run, "0.0")
    assert not own.taken and own.in_line


def test_a_late_call_takes_a_new_start_in_place_of_its_own_keeping_its_slot_and_its_place():
    run, waiter = running_run("A"), running_run("B")
    first = take(run, "0.0")
    take(run, "0.1")  # both slots held
    with transaction.atomic():
        gate, at = rows.lock("l", "")
        rows.queue(waiter.id, gate, "0.0", 0, at)  # and a run waits in line
    again = take(run, "0.0", replacing=first.use)
    assert again.taken and again.slot is None and again.use != first.use
    assert not LimitUse.objects.filter(id=first.use).exists() and LimitUse.objects.count() == 2
    assert LimitTicket.objects.filter(run=run, state="HELD").count() == 2  # its slot stays held, not taken twice
    once_more = take(run, "0.0", replacing=0)  # its start already gone: nothing to delete, one more taken
    assert once_more.taken and LimitUse.objects.count() == 3


def test_a_late_call_waits_for_room_in_the_window_like_any_other():
    run = running_run()
    spec = LimitSpec("l", rate=Rate(2, 1.0))
    first, _ = take(run, "0.0", spec), take(run, "0.1", spec)
    LimitUse.objects.filter(id=first.use).update(started_at=first.started + timedelta(seconds=0.5))  # not the oldest
    other = take(running_run("B"), "0.0", spec)
    assert not other.taken
    moved = take(run, "0.0", spec, replacing=first.use)  # its own start goes: room for one, taken
    assert moved.taken and LimitUse.objects.count() == 2
