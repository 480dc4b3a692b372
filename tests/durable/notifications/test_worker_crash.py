"""Once per event, with a worker killed mid-delivery: real Celery workers, a real HTTP receiver, the sweeper.

Three runs fail for good in a worker; each failure is an event, fanned out and sent by the worker to the
install's webhook. The receiver holds the first request open until the test SIGKILLs the worker (a crash after
the send, before its record). A second worker and the sweeper then finish the job: the held delivery is sent
again with the same Durable-Delivery-Id, which the receiver drops as a repeat, as an idempotent receiver does.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from durable import services
from durable.engine.notifications import EventKind
from durable.models import DeliveryAttempt, NotificationDelivery, NotificationEvent
from durable.roles import ADMIN
from durable.runtime.sweeper import sweep_all
from durable.tools.processes import WorkerProcess
from tests.durable.notifications.conftest import SECRET, subscriber
from tests.waiting import wait_for

Status = NotificationDelivery.Status
RUNS = 3


def failing_run(folder: Path, number: int) -> None:
    """A run that fails for good at its second step (each counts its failures in a file of its own)."""
    calls = str(folder / f"calls-{number}.txt")
    services.start_run(workflow="test-counting", business_key=f"crash-{number}",
                       input={"calls_file": calls, "fail_times": 1, "fail_kind": "final"})


def attempts(delivery_id: str) -> list[tuple[int, str]]:
    return list(DeliveryAttempt.objects.filter(delivery_id=delivery_id).values_list("number", "outcome"))


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_delivery_leaves_every_event_delivered_once(own_queue, webhook, worker_log_dir, settings,
                                                                        tmp_path):
    settings.DURABLE_PENDING_GRACE_SECONDS = 0.2  # the sweeper re-sends as soon as a lease has run out
    subscriber("ann", ADMIN, channels=("webhook",))
    # A lease long enough that the held call cannot time out before the kill, short enough to wait for.
    env = {"DURABLE_NOTIFY_WEBHOOK_URL": webhook.url, "DURABLE_NOTIFY_WEBHOOK_SECRET": SECRET,
           "DURABLE_NOTIFY_LEASE_SECONDS": "10", "DURABLE_HTTP_TIMEOUT_SECONDS": "5"}
    webhook.hold_first.set()

    first = WorkerProcess(env=env, name="notify-first", log_path=worker_log_dir / "notify-first.log").start()
    try:
        for number in range(RUNS):
            failing_run(tmp_path, number)
        wait_for(lambda: webhook.requests, what="the first delivery to reach the receiver")
        first.kill()  # SIGKILL while the request is in flight: no answer read, nothing recorded
    finally:
        first.stop()
    webhook.released.set()
    held = webhook.requests[0]["delivery_id"]
    assert NotificationDelivery.objects.get(id=held).status == Status.SENDING
    assert attempts(held) == [(1, "")]  # the attempt began and never said how it ended

    second = WorkerProcess(env=env, name="notify-second", log_path=worker_log_dir / "notify-second.log").start()
    try:
        def all_sent() -> bool:
            sweep_all()  # the beat's sweep, in the loop: fans out, re-sends what is due
            return NotificationDelivery.objects.filter(status=Status.SENT).count() == RUNS
        wait_for(all_sent, timeout=120, what="every event's delivery to be sent")
    finally:
        second.stop()

    events = NotificationEvent.objects.filter(kind=EventKind.RUN_FAILED)
    assert events.count() == RUNS  # no event lost
    for event in events:  # exactly one delivery per event, and it was sent
        [delivery] = NotificationDelivery.objects.filter(event=event)
        assert delivery.status == Status.SENT
    delivered = {str(d) for d in NotificationDelivery.objects.values_list("id", flat=True)}
    assert webhook.processed == {delivery_id: 1 for delivery_id in delivered}  # each acted on once
    assert webhook.seen(held) == 2  # the crash made one repeat, which the receiver dropped by its id
    assert all(request["signed"] for request in webhook.requests)
    assert attempts(held) == [(1, ""), (2, "sent")]
