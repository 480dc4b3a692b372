"""Re-sending waiting runs: soon after a lost message, with ever longer gaps into a backlog."""
from datetime import UTC, datetime, timedelta

from durable.engine.resend import resend_due

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=10)


def due(*, waited: float, last_sent_at: float | None) -> bool:
    """`waited` seconds since the run began waiting; the last copy went `last_sent_at` seconds after that."""
    last_sent = None if last_sent_at is None else T0 + timedelta(seconds=last_sent_at)
    return resend_due(waiting_since=T0, last_sent=last_sent, now=T0 + timedelta(seconds=waited), grace=GRACE)


def test_a_copy_goes_at_most_once_per_grace_period():
    assert not due(waited=9, last_sent_at=0)
    assert due(waited=10, last_sent_at=0)


def test_a_due_run_never_sent_since_it_began_waiting_goes_at_once():
    assert due(waited=1, last_sent_at=None)
    assert due(waited=1, last_sent_at=-5)  # the last copy went before it began waiting (an earlier step)


def test_copies_go_at_grace_then_twice_and_four_times_grace():
    sent, copies = 0.0, []
    for second in range(1, 81):
        if due(waited=second, last_sent_at=sent):
            sent = float(second)
            copies.append(second)
    assert copies == [10, 20, 40, 80]


def test_a_backlog_of_an_hour_costs_a_handful_of_copies_not_hundreds():
    sent, copies = 0.0, 0
    for second in range(1, 3601):
        if due(waited=second, last_sent_at=sent):
            sent, copies = float(second), copies + 1
    assert copies == 9  # 10, 20, 40, ... 2560 s; every 10 s would have been 360
