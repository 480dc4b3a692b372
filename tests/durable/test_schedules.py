"""Schedules (durable/schedules.py): created checked (a bad cron expression or time zone is a 400 naming the field,
nothing written), fired once per fire time by the sweeper on the database's clock, overlap and catch-up policies,
declared in code, and the deploy gate's view of them. Fired in this process; tests/durable/runtime/
test_schedules_worker.py fires them with real workers."""
from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from pydantic import BaseModel

from durable import Scheduled, Workflow, schedules
from durable.crons import InvalidCron, parse_cron
from durable.engine.schedules import CatchUp, Overlap
from durable.engine.states import RunStatus
from durable.errors import Forbidden, InvalidInput
from durable.models import OperatorAction, Run, Schedule
from durable.registry import registry
from durable.roles import OPERATOR
from durable.runtime.sweeper import sweep_all
from durable.store import store
from tests.conftest import user_with_roles

pytestmark = pytest.mark.django_db


def scheduler() -> User:
    return User.objects.filter(username="scheduler").first() or user_with_roles("scheduler", OPERATOR)


def make(name: str = "nightly", **given) -> Schedule:
    return schedules.create(user=scheduler(), name=name,
                            **{"workflow": "test-trivial", "cron": "* * * * *", **given})


def due_since(schedule: Schedule, ago: timedelta) -> datetime:
    """Move the schedule's first unhandled fire time back, as if every worker had been down since then. Away from a
    minute's turn first: the schedules here fire every minute, and a test counts the fire times due when it looks."""
    second = store().db_now().second
    if second < 6 or second > 50:
        time.sleep((66 - second) % 60)
    cron = parse_cron(schedule.cron, schedule.time_zone)
    at = cron.last_at_or_before(store().db_now() - ago)
    assert at is not None
    Schedule.objects.filter(id=schedule.id).update(next_fire_at=at)
    return at


def runs_of(schedule: Schedule) -> list[Run]:
    return list(Run.objects.filter(idempotency_key__startswith=f"schedule:{schedule.id}:").order_by("idempotency_key"))


@pytest.mark.parametrize(("given", "field"), [
    ({"cron": "61 * * * *"}, "cron"), ({"cron": "* * *"}, "cron"), ({"cron": "0 0 30 2 *"}, "cron"),
    ({"time_zone": "Mars/Olympus_Mons"}, "time_zone"), ({"time_zone": "../../etc/passwd"}, "time_zone"),
    ({"time_zone": ""}, "time_zone"), ({"workflow": "nope"}, "workflow"), ({"input": {"n": "many"}}, "input"),
    ({"business_key_template": "{fire_time.tzinfo}"}, "business_key_template"), ({"overlap": "queue"}, "overlap"),
    ({"catch_up": "some"}, "catch_up"), ({"catch_up_window": 0}, "catch_up_window"), ({"name": "a b"}, "name"),
])
def test_a_bad_field_is_refused_naming_it_and_nothing_is_written(given, field):
    scheduler()
    before = OperatorAction.objects.count()
    with pytest.raises(InvalidInput) as refused:
        make(**given)
    assert field in refused.value.errors
    assert not Schedule.objects.exists() and OperatorAction.objects.count() == before


def test_a_cron_expression_is_read_in_its_time_zone_across_dst():
    paris = parse_cron("30 2 * * *", "Europe/Paris")
    spring_night = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)  # 02:30 does not exist in Paris on March 29
    assert paris.next_after(spring_night) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 local
    assert paris.next_after(datetime(2026, 7, 1, tzinfo=UTC)) == datetime(2026, 7, 1, 0, 30, tzinfo=UTC)
    assert paris.last_at_or_before(datetime(2026, 7, 1, 0, 30, tzinfo=UTC)) == datetime(2026, 7, 1, 0, 30, tzinfo=UTC)
    with pytest.raises(InvalidCron) as bad:
        parse_cron("30 2 * * *", "Europe/Atlantis")
    assert bad.value.field == "time_zone"


def test_a_new_schedule_is_due_at_its_next_fire_time_and_audited():
    schedule = make()
    assert schedule.next_fire_at > store().db_now() - timedelta(seconds=1)
    assert schedule.next_fire_at.second == 0 and not runs_of(schedule)
    assert OperatorAction.objects.filter(action="create_schedule", actor__username="scheduler").count() == 1


def test_a_due_fire_time_starts_one_run_however_often_the_sweeper_looks():
    schedule = make(business_key_template="report-{fire_time:%H%M}")
    fire_time = due_since(schedule, timedelta(seconds=5))
    for _ in range(3):
        sweep_all()
    [run] = runs_of(schedule)
    assert run.idempotency_key == f"schedule:{schedule.id}:{fire_time:%Y-%m-%dT%H:%M:%SZ}"
    assert run.business_key == f"report-{fire_time:%H%M}" and run.workflow_name == "test-trivial"
    schedule.refresh_from_db()
    assert (schedule.last_run_id, schedule.last_fire_at) == (run.id, fire_time)
    assert schedule.next_fire_at == fire_time + timedelta(minutes=1) and "started run" in schedule.last_outcome


def test_a_fire_time_looked_at_twice_at_once_starts_one_run():
    schedule = make()
    due_since(schedule, timedelta(seconds=5))
    stale = Schedule.objects.get(id=schedule.id)
    assert schedules._fire(stale, store().db_now()) == 1
    assert schedules._fire(stale, store().db_now()) == 0  # the second look's conditional UPDATE finds it moved on
    assert len(runs_of(schedule)) == 1


def test_overlap_skip_starts_nothing_while_the_last_run_is_active_and_start_anyway_does():
    skipping = make("skipping", overlap=Overlap.SKIP.value, catch_up="all")
    starting = make("starting", overlap=Overlap.START_ANYWAY.value, catch_up="all")
    for schedule in (skipping, starting):
        due_since(schedule, timedelta(minutes=2))  # three fire times due; no worker here, so each run stays PENDING
    sweep_all()
    assert len(runs_of(skipping)) == 1 and len(runs_of(starting)) == 3
    skipping.refresh_from_db()
    assert "skipped, the last run" in skipping.last_outcome


@pytest.mark.parametrize(("catch_up", "window", "started"), [
    (CatchUp.NONE, 3600, 1), (CatchUp.LATEST, 3600, 1), (CatchUp.ALL, 3600, 11), (CatchUp.ALL, 300, 5),
])
def test_after_a_ten_minute_outage_each_catch_up_policy_starts_what_it_says(catch_up, window, started):
    schedule = make(catch_up=catch_up.value, catch_up_window=window, overlap="start_anyway")
    due_since(schedule, timedelta(minutes=10))
    sweep_all()
    runs = runs_of(schedule)
    assert len(runs) == started and len({run.idempotency_key for run in runs}) == started
    schedule.refresh_from_db()
    assert schedule.next_fire_at > store().db_now() - timedelta(seconds=60)  # caught up: nothing is left due


def test_a_paused_schedule_fires_nothing_and_resumed_it_starts_from_now():
    schedule = make()
    schedules.edit(schedule.id, user=None, paused=True)
    due_since(schedule, timedelta(minutes=10))
    sweep_all()
    assert not runs_of(schedule)
    resumed = schedules.edit(schedule.id, user=None, paused=False)
    assert resumed.next_fire_at > store().db_now() - timedelta(seconds=1)  # what passed while paused is not caught up
    sweep_all()
    assert not runs_of(schedule)


def test_an_edit_with_a_bad_cron_expression_is_refused_and_changes_nothing():
    schedule = make()
    with pytest.raises(InvalidInput) as refused:
        schedules.edit(schedule.id, user=None, cron="every night")
    assert list(refused.value.errors) == ["cron"]
    assert Schedule.objects.get(id=schedule.id).cron == "* * * * *"


class Nothing(BaseModel):
    pass


@pytest.fixture
def declared(monkeypatch):
    workflow = Workflow(name="test-declared-schedule", version=1, state=Nothing, input=Nothing, schedules=[
        Scheduled("test-nightly", "0 2 * * *", time_zone="Europe/Paris", catch_up=CatchUp.NONE)])
    workflow.step(lambda ctx, state: state, name="only")
    monkeypatch.setitem(registry._by_key, (workflow.name, 1), workflow)
    return workflow


def test_a_schedule_declared_in_code_is_written_once_and_kept_by_its_code(declared):
    assert schedules.write_declared() == 1 and schedules.write_declared() == 0
    schedule = Schedule.objects.get(name="test-nightly")
    assert (schedule.workflow, schedule.cron, schedule.time_zone, schedule.catch_up, schedule.declared_in_code) == (
        "test-declared-schedule", "0 2 * * *", "Europe/Paris", "none", True)
    with pytest.raises(Forbidden):
        schedules.edit(schedule.id, user=None, cron="0 3 * * *")
    with pytest.raises(Forbidden):
        schedules.delete(schedule.id, user=None)
    schedules.edit(schedule.id, user=None, paused=True)  # an operator's pause stands
    assert schedules.write_declared() == 0 and Schedule.objects.get(id=schedule.id).paused


def test_the_deploy_gate_fails_on_a_schedule_whose_workflow_goes_away(declared, monkeypatch):
    schedules.write_declared()
    monkeypatch.delitem(registry._by_key, (declared.name, 1))
    out = StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("durable_versions", "--check", stdout=out)
    assert refused.value.returncode == 1
    assert "schedule test-nightly (test-declared-schedule): its workflow is no longer registered" in out.getvalue()


def test_a_run_a_schedule_started_is_an_ordinary_run():
    schedule = make()
    due_since(schedule, timedelta(seconds=5))
    sweep_all()
    [run] = runs_of(schedule)
    assert run.status == RunStatus.PENDING and run.created_by.username == "scheduler"
