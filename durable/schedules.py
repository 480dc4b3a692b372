"""Schedules: create, edit, pause, resume and delete them (audited), write the ones declared in code, and fire the
due ones from the sweeper.

A fire time starts its run through `services.start_run` with the idempotency key "schedule:<id>:<fire time>", in
the same transaction as the conditional UPDATE that moves the schedule's next fire time on: two workers that look
at once cannot both fire it, and a fire time started once is never started again, whatever crashes.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from durable.audit import acting_user, audit
from durable.conf import durable_settings
from durable.crons import InvalidCron, parse_cron
from durable.engine.schedules import CatchUp, Overlap, Scheduled, business_key_for, fire_times_due
from durable.engine.states import TERMINAL
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import Run, Schedule
from durable.permissions import Caller
from durable.registry import UnknownWorkflow, registry
from durable.runtime import wakes
from durable.scope import runs_in_scope
from durable.services import start_run

log = logging.getLogger("durable.schedules")

MANAGE_SCHEDULE = "durable.manage_schedule"
EDITABLE = ("workflow", "cron", "time_zone", "input", "business_key_template", "overlap", "catch_up",
            "catch_up_window", "paused")
MAX_WINDOW_SECONDS = 366 * 86400
FIRED_PER_LOOK = 100  # runs one schedule starts per look at most (CatchUp.ALL far behind catches up in steps)


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """The schedule's fields checked together; InvalidInput names every field that is wrong, nothing written."""
    errors: dict[str, Any] = {}
    try:
        cron = parse_cron(str(values["cron"]), str(values["time_zone"]))
        values["cron"] = cron.expression
    except InvalidCron as exc:
        errors[exc.field] = [str(exc)]
    for name, kind in (("overlap", Overlap), ("catch_up", CatchUp)):
        if values[name] not in {choice.value for choice in kind}:
            errors[name] = [f"{values[name]!r} is not one of {', '.join(choice.value for choice in kind)}"]
    window = values["catch_up_window"]
    if not isinstance(window, int) or isinstance(window, bool) or not 0 < window <= MAX_WINDOW_SECONDS:
        errors["catch_up_window"] = [f"a whole number of seconds from 1 to {MAX_WINDOW_SECONDS} (a year)"]
    try:
        business_key_for(values["business_key_template"], schedule=values.get("name", "x"),
                         fire_time=datetime(2026, 1, 2, 3, 4, tzinfo=UTC))
    except (ValueError, TypeError) as exc:
        errors["business_key_template"] = [str(exc)]
    try:
        definition = registry.current(values["workflow"])
        values["input"] = definition.input.model_validate(values["input"]).model_dump(mode="json")
    except UnknownWorkflow:
        errors["workflow"] = [f"no workflow named {values['workflow']!r} is registered"]
    except ValidationError as exc:  # named field by field, as a start's input is (durable/services.py)
        errors["input"] = {".".join(map(str, err["loc"])) or "__root__": [err["msg"]] for err in exc.errors()}
    if errors:
        raise InvalidInput(errors)
    return values


def _next_fire(schedule_values: dict[str, Any], now: datetime) -> datetime:
    return parse_cron(schedule_values["cron"], schedule_values["time_zone"]).next_after(now)


def _now() -> datetime:
    from durable.store import store

    return store().db_now()


def create(*, user: Caller | None, name: str, workflow: str, cron: str, time_zone: str = "UTC",
           input: dict[str, Any] | None = None, business_key_template: str = "", overlap: str = Overlap.SKIP.value,
           catch_up: str = CatchUp.LATEST.value, catch_up_window: int = 86400, paused: bool = False,
           declared_in_code: bool = False) -> Schedule:
    """A new schedule, its first fire time the first after now (the database's clock); audited."""
    if not name or len(name) > 100 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise InvalidInput({"name": ["1 to 100 letters, digits, '-', '_' or '.'"]})
    values = _checked({"name": name, "workflow": workflow, "cron": cron, "time_zone": time_zone,
                       "input": input or {}, "overlap": overlap, "catch_up": catch_up, "paused": paused,
                       "business_key_template": business_key_template or f"{name}:{{fire_time:%Y-%m-%dT%H:%M}}",
                       "catch_up_window": catch_up_window})
    try:
        with transaction.atomic():
            schedule = Schedule.objects.create(**values, declared_in_code=declared_in_code,
                                               next_fire_at=_next_fire(values, _now()),
                                               created_by=acting_user(user))
            audit(user=user, action="create_schedule", run=None, source="schedules", status_before="",
                  status_after="paused" if paused else "active", detail={"schedule": name, **_described(values)})
    except IntegrityError:
        raise Conflict(f"a schedule named {name!r} already exists: choose another name", current="exists") from None
    return schedule


def _described(values: dict[str, Any]) -> dict[str, Any]:
    return {key: values[key] for key in EDITABLE if key in values}


def edit(schedule_id: Any, *, user: Caller | None, **changes: Any) -> Schedule:
    """Change a schedule's definition; a new cron expression or time zone takes effect from now. A schedule declared
    in code is edited in its code (403 here), but paused and resumed like any other."""
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise InvalidInput({field: ["not a field of a schedule that can be edited"] for field in unknown})
    with transaction.atomic():
        schedule = _locked(schedule_id)
        if schedule.declared_in_code and set(changes) - {"paused"}:
            raise Forbidden(f"schedule {schedule.name} is declared in code with its workflow: change it there "
                            "(it may be paused and resumed here)", action="edit_schedule")
        before = {key: getattr(schedule, key) for key in EDITABLE}
        values = _checked({**before, **changes, "name": schedule.name})
        moved = any(values[key] != before[key] for key in ("cron", "time_zone")) or (before["paused"]
                                                                                    and not values["paused"])
        for key in EDITABLE:
            setattr(schedule, key, values[key])
        if moved:  # from now on: what passed while it was paused, or under the old expression, is not caught up
            schedule.next_fire_at = _next_fire(values, _now())
        schedule.save()
        changed = {key: values[key] for key in EDITABLE if values[key] != before[key]}
        audit(user=user, action="edit_schedule", run=None, source="schedules",
              status_before="paused" if before["paused"] else "active",
              status_after="paused" if schedule.paused else "active", detail={"schedule": schedule.name, **changed})
    return schedule


def _locked(schedule_id: Any) -> Schedule:
    schedule = Schedule.objects.select_for_update().filter(id=schedule_id).first()
    if schedule is None:
        raise Schedule.DoesNotExist(f"no schedule {schedule_id}")
    return schedule


def delete(schedule_id: Any, *, user: Caller | None, reason: str = "") -> None:
    """Delete an operator's schedule; one declared in code is deleted from its code (403 here)."""
    with transaction.atomic():
        schedule = _locked(schedule_id)
        if schedule.declared_in_code:
            raise Forbidden(f"schedule {schedule.name} is declared in code with its workflow: remove it there, or "
                            "pause it here", action="delete_schedule")
        audit(user=user, action="delete_schedule", run=None, source="schedules",
              status_before="paused" if schedule.paused else "active", status_after="deleted",
              reason=reason.strip(), detail={"schedule": schedule.name})
        schedule.delete()


@dataclass(frozen=True)
class Fired:
    """What one look at the due schedules did."""

    schedules: int
    started: int


def fire_due(limit: int = 100) -> Fired:
    """Start the runs of every schedule due by the database's clock (the sweeper's task, and the armed timer's)."""
    now = _now()
    due = list(Schedule.objects.filter(runs_in_scope(), paused=False, next_fire_at__lte=now)
               .order_by("next_fire_at")[:limit])
    return Fired(len(due), sum(_fire(schedule, now) for schedule in due))


def _fire(schedule: Schedule, now: datetime) -> int:
    """Start the runs of one due schedule's fire times: one transaction, claimed by moving its next fire time on."""
    assert schedule.next_fire_at is not None
    cron = parse_cron(schedule.cron, schedule.time_zone)
    firing = fire_times_due(due_at=schedule.next_fire_at, now=now, next_after=cron.next_after,
                            last_at_or_before=cron.last_at_or_before, catch_up=CatchUp(schedule.catch_up),
                            window=timedelta(seconds=schedule.catch_up_window), limit=FIRED_PER_LOOK,
                            on_time=timedelta(seconds=durable_settings.DURABLE_SCHEDULE_ON_TIME_SECONDS))
    with transaction.atomic():
        if not Schedule.objects.filter(id=schedule.id, paused=False, next_fire_at=schedule.next_fire_at).update(
                next_fire_at=firing.next_fire_at):
            return 0  # another worker fired it, or an operator paused or edited it meanwhile
        outcome = f"missed fire times passed over (catch-up: {schedule.catch_up})" if firing.passed_over else ""
        started = 0
        for fire_time in firing.fire_times:
            run, outcome = _start(schedule, fire_time, cron.zone)
            started += run is not None and run.id != schedule.last_run_id
            schedule.last_run, schedule.last_fire_at = (run or schedule.last_run), fire_time
        Schedule.objects.filter(id=schedule.id).update(last_run=schedule.last_run, last_fire_at=schedule.last_fire_at,
                                                       last_outcome=outcome[:500])
    return started


def _start(schedule: Schedule, fire_time: datetime, zone: Any) -> tuple[Run | None, str]:
    """The run of one fire time (None: none started), and what happened, as the schedule's page shows it."""
    when = f"{fire_time:%Y-%m-%d %H:%M} UTC"
    if schedule.overlap == Overlap.SKIP and schedule.last_run_id is not None and Run.objects.filter(
            id=schedule.last_run_id).exclude(status__in=TERMINAL).exists():
        return None, f"{when}: skipped, the last run {schedule.last_run_id} is still active (overlap: skip)"
    try:
        with transaction.atomic():
            run, _ = start_run(workflow=schedule.workflow, input=schedule.input, source="schedule",
                               business_key=business_key_for(schedule.business_key_template, schedule=schedule.name,
                                                             fire_time=fire_time.astimezone(zone)),
                               idempotency_key=f"schedule:{schedule.id}:{fire_time:%Y-%m-%dT%H:%M:%SZ}",
                               user=schedule.created_by)
    except (InvalidInput, Conflict, Forbidden, ValueError) as exc:
        log.warning("schedule %s could not start its run for %s: %s", schedule.name, when, exc)
        return None, f"{when}: no run started: {exc}"
    return run, f"{when}: started run {run.id}"


def write_declared() -> int:
    """Write the schedules the current versions of the workflows loaded here declare (a worker's first sweep):
    new ones created, changed ones updated; an operator's pause or resume stands. Returns how many changed."""
    changed = 0
    for name in registry.names():
        for declared in registry.current(name).schedules:
            try:
                changed += _write_declared(name, declared)
            except (InvalidInput, Conflict, Forbidden) as exc:
                log.error("workflow %s declares schedule %s, which cannot be written: %s", name, declared.name, exc)
    return changed


def _write_declared(workflow: str, declared: Scheduled) -> int:
    values: dict[str, Any] = {"workflow": workflow, "cron": declared.cron, "time_zone": declared.time_zone,
              "input": dict(declared.input), "business_key_template": declared.business_key,
              "overlap": Overlap(declared.overlap).value, "catch_up": CatchUp(declared.catch_up).value,
              "catch_up_window": int(declared.catch_up_window.total_seconds())}
    existing = Schedule.objects.filter(name=declared.name).first()
    if existing is None:
        create(user=None, name=declared.name, paused=declared.paused, declared_in_code=True, **values)
        return 1
    if not existing.declared_in_code:
        raise Conflict(f"an operator's schedule is named {declared.name} too: rename one", current="exists")
    before = {key: getattr(existing, key) for key in values}
    checked = _checked({**values, "name": declared.name, "paused": existing.paused})
    if all(checked[key] == before[key] for key in values):
        return 0
    Schedule.objects.filter(id=existing.id).update(
        **{key: checked[key] for key in values}, updated_at=timezone.now(),
        next_fire_at=_next_fire(checked, _now()) if (checked["cron"], checked["time_zone"]) != (
            before["cron"], before["time_zone"]) else existing.next_fire_at)
    return 1


# The sweeper's part (registered from durable/apps.py): write the declared schedules once per process, fire what
# is due, and, in a worker, arm a timer for the next fire time due before the next sweep, so that a schedule fires
# within milliseconds of its time rather than at the sweep after it (which still fires whatever the timer misses).
_declared_written: list[bool] = []
_timer_lock = threading.Lock()
_timer: list[tuple[datetime, threading.Timer]] = []  # this process's one armed timer and the fire time it is for


def sweep() -> int:
    """One sweep's look at the schedules; returns how many runs they started."""
    if not _declared_written:
        write_declared()
        _declared_written.append(True)
    started = fire_due().started
    if wakes.arm_on_park:  # a Celery worker (durable.runtime.worker); elsewhere the next sweep fires it
        arm_next(2 * durable_settings.DURABLE_SWEEP_SECONDS)
    return started


def arm_next(horizon_seconds: float) -> datetime | None:
    """Arm this process's timer for the first fire time due within the horizon; returns that time (None: none)."""
    now = _now()
    due = (Schedule.objects.filter(runs_in_scope(), paused=False, next_fire_at__gt=now,
                                   next_fire_at__lte=now + timedelta(seconds=horizon_seconds))
           .order_by("next_fire_at").values_list("next_fire_at", flat=True).first())
    if due is None:
        return None
    with _timer_lock:
        if _timer and _timer[0][0] <= due and _timer[0][1].is_alive():
            return due  # armed already, for this time or an earlier one
        for _, earlier in _timer:
            earlier.cancel()
        timer = threading.Timer((due - now).total_seconds() + 0.002, _ring)
        timer.daemon = True
        _timer[:] = [(due, timer)]
        timer.start()
    return due


def _ring() -> None:
    """The armed timer: fire what is due, then arm for the next fire time; the database is left as it was found."""
    from django.db import connection

    from durable.runtime.forks import between_forks

    with _timer_lock:  # this timer has rung: the next one is armed anew, not taken for this one still armed
        if _timer and _timer[0][1] is threading.current_thread():
            _timer.clear()
    try:
        with between_forks():  # the worker's pool forks from this process (durable.runtime.forks)
            fire_due()
            arm_next(2 * durable_settings.DURABLE_SWEEP_SECONDS)
    except Exception:  # the next sweep fires it
        log.warning("a schedule's timer could not fire; the sweeper will", exc_info=True)
    finally:
        with between_forks():
            connection.close()
