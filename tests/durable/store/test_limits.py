"""Named limits' rows (durable/store/limits.py), on Postgres and SQLite: the gate row each worker takes first, a slot
counted only while the lease that took it holds, room kept for a woken run for its grace period, a pause that only
lengthens, call starts and tokens counted in the window."""
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from durable import services
from durable.engine.call_limits import LimitSpec, Rate
from durable.engine.states import RunStatus
from durable.models import LimitGate, LimitTicket, Run
from durable.store import limits as rows

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = LimitSpec("l", concurrency=3, rate=Rate(10, 1.0), tokens=Rate(100, 60.0))


def running_run(key: str = "A") -> Run:
    run, _ = services.start_run(workflow="test-limited", input={"calls_file": "/dev/null"}, business_key=key,
                                enqueue=False)
    Run.objects.filter(id=run.id).update(status=RunStatus.RUNNING, fencing_token=4)
    run.refresh_from_db()
    return run


def test_the_gate_row_is_made_once_per_limit_and_key_and_read_with_the_clock():
    with transaction.atomic():
        gate, at = rows.lock("l", "k")
    with transaction.atomic():
        again, later = rows.lock("l", "k")
    assert gate.id == again.id and LimitGate.objects.count() == 1
    assert abs((later - timezone.now()).total_seconds()) < 5 and later >= at


def test_a_slot_counts_while_the_lease_that_took_it_holds():
    run = running_run()
    with transaction.atomic():
        gate, at = rows.lock("l", "")
        slot, use = rows.take(SPEC, gate, run.id, "0.0", run.fencing_token, 0, at, ticketed=False)
        assert rows.held_now(SPEC, gate, at, 10.0)[0].in_use == 1
    Run.objects.filter(id=run.id).update(fencing_token=5)  # claimed again: a new lease
    held, _ = rows.held_now(SPEC, gate, timezone.now(), 10.0)
    assert held.in_use == 0 and len(held.starts) == 1  # the slot is free; the start still counts in the window
    rows.give_back(slot, use, tokens=40)
    assert rows.held_now(SPEC, gate, timezone.now(), 10.0)[0].tokens[0][1] == 40
    assert not LimitTicket.objects.exists()


def test_room_granted_is_kept_for_the_grace_period_then_waits_again_in_its_place():
    run = running_run()
    with transaction.atomic():
        gate, at = rows.lock("l", "")
        ticket = rows.queue(run.id, gate, "0.0", 3, at)
        rows.grant([ticket.id], at)
    held, tickets = rows.held_now(SPEC, gate, at + timedelta(seconds=5), 10.0, run.id, "0.0")
    assert (held.in_use, held.granted, tickets.mine_kept, tickets.queued) == (1, 1, True, False)
    later = at + timedelta(seconds=11)
    held, tickets = rows.held_now(SPEC, gate, later, 10.0, run.id, "0.0")
    assert (held.in_use, tickets.mine_kept, tickets.queued) == (0, False, True)
    [waiter] = rows.waiters(gate, later, 10.0)
    assert (waiter.ticket, waiter.priority, waiter.arrived_at, waiter.state) == (ticket.id, 3, at, "WAITING")


def test_a_pause_only_lengthens_and_holds_for_every_key():
    soon, later = timezone.now() + timedelta(seconds=5), timezone.now() + timedelta(seconds=50)
    rows.pause("l", later)
    rows.pause("l", soon)
    with transaction.atomic():
        gate, _ = rows.lock("l", "customer-7")
    assert rows.paused_until(gate) == later


def test_what_each_limit_holds_is_read_per_key():
    run, other = running_run("A"), running_run("B")
    with transaction.atomic():
        gate, at = rows.lock("l", "A")
        rows.take(SPEC, gate, run.id, "0.0", run.fencing_token, 0, at, ticketed=False)
        other_gate, _ = rows.lock("l", "B")
        rows.queue(other.id, other_gate, "0.0", 0, at)
    Run.objects.filter(id=other.id).update(status=RunStatus.WAITING)
    assert [(row.limit, row.key, row.in_use, row.waiting) for row in rows.use_by_key(10.0)] == [
        ("l", "A", 1, 0), ("l", "B", 0, 1)]
    assert rows.used_since("l", "A", at - timedelta(seconds=1)) == (1, 0)
