"""Schedules fired by real Celery workers (issue 39, "Proof"): three workers sweeping and arming timers start one
run per fire time, and after a ten-minute outage (the schedules' fire times moved ten minutes back, as if every
worker had been down since) each catch-up policy starts what it says, once."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.test import override_settings

from durable import schedules
from durable.crons import parse_cron
from durable.engine.states import RunStatus
from durable.models import Run, Schedule
from durable.runtime.dispatch import drop_queue
from durable.store import store
from durable.tools.processes import WorkerProcess
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MINUTE = timedelta(minutes=1)


@pytest.fixture(scope="module")
def three_workers(django_db_setup, django_db_blocker, worker_log_dir):
    """Three real workers sweeping every half second on a queue of this module's own: each may take the sweep turn,
    and each arms its own timers for the fire times due before its next sweep."""
    queue = f"durable-test-schedules-{uuid.uuid4().hex[:8]}"
    env = {"DURABLE_SWEEP_SECONDS": "0.5", "DURABLE_PENDING_GRACE_SECONDS": "5"}
    with django_db_blocker.unblock(), override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        workers = [WorkerProcess(env=env, log_path=worker_log_dir / f"schedules-{n}.log", name=f"schedules-{n}")
                   .start() for n in range(3)]
    yield queue
    for worker in workers:
        worker.stop()
    with override_settings(CELERY_TASK_DEFAULT_QUEUE=queue):
        drop_queue(queue)


@pytest.fixture
def on_workers(three_workers, settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = three_workers


def make(name: str, cron: str, **given: object) -> Schedule:
    return schedules.create(user=None, name=name, workflow="test-trivial", cron=cron, paused=True, **given)


def due_from(schedule: Schedule, at: datetime) -> None:
    """Active, first due at `at`: in the past, every worker was down since then; in the future, it is due then."""
    Schedule.objects.filter(id=schedule.id).update(paused=False, next_fire_at=at)


def fire_times(schedule: Schedule) -> list[str]:
    """The fire time of each run the schedule started, as its idempotency key names it."""
    keys = Run.objects.filter(idempotency_key__startswith=f"schedule:{schedule.id}:").values_list(
        "idempotency_key", flat=True)
    return sorted(key.split(":", 2)[2] for key in keys)


def stamp(at: datetime) -> str:
    return f"{at:%Y-%m-%dT%H:%M:%SZ}"


def settled(*watched: Schedule) -> bool:
    """Every watched schedule has looked at its due fire times, and every run they started has ended."""
    now = store().db_now()
    rows = Schedule.objects.filter(id__in=[s.id for s in watched])
    return (all(row.last_outcome and row.next_fire_at > now - timedelta(seconds=1) for row in rows)
            and not Run.objects.filter(
                idempotency_key__startswith="schedule:").exclude(status=RunStatus.SUCCEEDED).exists())


def test_three_workers_start_one_run_per_fire_time_on_time_and_behind(on_workers):
    now = store().db_now()
    every_minute = make("every-minute", "* * * * *", catch_up="all", overlap="start_anyway")
    yearly = make("yearly", "0 0 1 1 *")
    behind = parse_cron("* * * * *", "UTC").last_at_or_before(now - 5 * MINUTE)
    assert behind is not None
    soon = now + timedelta(seconds=3)  # a fire time ahead: a worker's armed timer (or its next sweep) fires it
    due_from(every_minute, behind)
    due_from(yearly, soon)
    wait_for(lambda: settled(every_minute, yearly), timeout=90, what="both schedules to fire and their runs to end")
    started = fire_times(every_minute)  # every minute from five minutes ago to now (and on, while the test ends)
    assert len(started) >= 6 and started == [stamp(behind + n * MINUTE) for n in range(len(started))]
    assert fire_times(yearly) == [stamp(soon)]


def test_after_a_ten_minute_outage_each_catch_up_policy_starts_what_it_says_once(on_workers):
    now = store().db_now()
    ten_minutes_ago = parse_cron("* * * * *", "UTC").last_at_or_before(now - 10 * MINUTE)
    assert ten_minutes_ago is not None
    five_minutes_later = ten_minutes_ago + 5 * MINUTE
    twice_an_hour = f"{ten_minutes_ago.minute},{five_minutes_later.minute} * * * *"  # both in the outage
    none = make("none", twice_an_hour, catch_up="none")
    latest = make("latest", twice_an_hour, catch_up="latest")
    every = make("all", "* * * * *", catch_up="all", catch_up_window=3600, overlap="start_anyway")
    for schedule in (none, latest, every):
        due_from(schedule, ten_minutes_ago)
    wait_for(lambda: settled(none, latest, every), timeout=90, what="the schedules to catch up and their runs to end")
    assert fire_times(none) == []
    assert fire_times(latest) == [stamp(five_minutes_later)]
    started = fire_times(every)  # every minute of the outage, and the minutes since
    assert len(started) >= 11 and started == [stamp(ten_minutes_ago + n * MINUTE) for n in range(len(started))]
