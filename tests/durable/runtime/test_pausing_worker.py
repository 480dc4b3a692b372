"""Pause and resume with real worker processes (issue 39, "Proof"): a run paused while a call is in flight records
that call, makes no call after the step boundary, and resumes where it stopped after the worker was restarted; a
run paused while a step that makes no call runs sends nothing from the next step (an activity, a ctx.parallel
group) and sends it once resumed; a waiting run paused stays parked when its event arrives, and takes it up once
resumed."""
from __future__ import annotations

from pathlib import Path

import pytest

from durable import pauses, send_event, services
from durable.engine.states import RunStatus
from durable.models import OperatorAction, Run
from durable.tools.processes import WorkerProcess
from tests.conftest import user_with_roles
from tests.durable.workflows import calls_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SWEEPING = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1"}


def ended(run: Run) -> Run:
    wait_for(lambda: status_of(run.id) in (RunStatus.SUCCEEDED, RunStatus.FAILED), what=f"run {run.id} to end")
    run.refresh_from_db()
    return run


def test_a_run_paused_mid_call_records_the_call_stops_at_the_boundary_and_resumes_after_a_worker_restart(
        own_queue, tmp_path, worker_log_dir):
    operator = user_with_roles("pause-operator", "operator")
    calls, hold = tmp_path / "calls", tmp_path / "hold"
    hold.touch()  # step s2 makes its call a2, then holds until this file goes: a call in flight, as the run sees it
    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "pausing-1.log", name="pausing-1"):
        run, _ = services.start_run(workflow="test-counting", business_key="pause-mid-call",
                                    input={"calls_file": str(calls), "hold_file": str(hold)})
        wait_for(lambda: calls_in(calls) == ["a1", "a2"], what="s2's call to be made")
        asked = pauses.pause_run(run_id=run.id, user=operator, source="api", reason="prompt v3 is wrong")
        assert asked.status == RunStatus.RUNNING and asked.pause_requested_at is not None  # a step is in flight
        hold.unlink()  # the step in flight ends, and its checkpoint is written
        wait_for(lambda: status_of(run.id) == RunStatus.PAUSED, what="the run to pause at the boundary")
    run.refresh_from_db()
    assert (run.current_step, run.checkpoint_seq, run.pause_reason) == ("s3", 2, "prompt v3 is wrong")
    assert calls_in(calls) == ["a1", "a2"]  # s2's call recorded; s3's never made
    assert run.lease_owner is None

    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "pausing-2.log", name="pausing-2"):
        assert status_of(run.id) == RunStatus.PAUSED  # a new worker and its sweeper leave a paused run alone
        pauses.resume_run(run_id=run.id, user=operator, source="console", reason="prompt fixed")
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == ["a1", "a2", "a3", "a4"]  # each call once: the run went on from s3
    assert not run.pause_requested_at and not run.pause_reason
    audit = list(OperatorAction.objects.filter(run=run).order_by("created_at").values_list(
        "action", "status_before", "status_after", "reason"))
    assert audit == [("pause", "RUNNING", "RUNNING", "prompt v3 is wrong"),
                     ("resume", "PAUSED", "PENDING", "prompt fixed")]


@pytest.mark.parametrize("parallel", [False, True], ids=["activity", "parallel"])
def test_a_pause_committed_after_a_step_that_made_no_call_stops_the_next_step_before_its_call_is_sent(
        own_queue, tmp_path, worker_log_dir, parallel):
    calls, hold = tmp_path / "calls", tmp_path / "hold"
    hold.touch()  # step `think` (no call) holds until this file goes; step `ask` then calls a1 (and a2)
    # No boundary looks by the clock: the pause can only be seen before `ask`'s first call leaves.
    env = {**SWEEPING, "DURABLE_PAUSE_LOOK_SECONDS": "3600"}
    name = f"pause-gap-{'parallel' if parallel else 'activity'}"
    with WorkerProcess(env=env, log_path=worker_log_dir / f"{name}.log", name=name):
        run, _ = services.start_run(workflow="test-pause-gap", business_key=name,
                                    input={"calls_file": str(calls), "hold_file": str(hold), "parallel": parallel})
        wait_for(lambda: Path(f"{hold}.reached").exists(), what="step `think` to run")
        asked = pauses.pause_run(run_id=run.id, user=None, source="api", reason="the tool is wrong")
        assert asked.status == RunStatus.RUNNING and asked.pause_requested_at is not None
        hold.unlink()  # `think` ends, its checkpoint is written, `ask` starts
        wait_for(lambda: status_of(run.id) == RunStatus.PAUSED, what="the run to pause before `ask` calls")
        run.refresh_from_db()
        assert (run.current_step, run.checkpoint_seq, run.lease_owner) == ("ask", 1, None)
        assert calls_in(calls) == []  # the downstream was never called
        pauses.resume_run(run_id=run.id, user=None, source="api", reason="the tool is fixed")
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(calls_in(calls)) == (["a1", "a2"] if parallel else ["a1"])  # each sent once, after the resume


def test_a_waiting_run_paused_stays_parked_when_its_event_arrives_and_takes_it_once_resumed(
        own_queue, tmp_path, worker_log_dir):
    calls = tmp_path / "calls"
    with WorkerProcess(env=SWEEPING, log_path=worker_log_dir / "pausing-3.log", name="pausing-3"):
        run, _ = services.start_run(workflow="test-wait-event", business_key="pause-parked",
                                    input={"calls_file": str(calls)})
        wait_for(lambda: status_of(run.id) == RunStatus.WAITING, what="the run to park")
        paused = pauses.pause_run(run_id=run.id, user=None, source="command", reason="hold it")
        assert paused.status == RunStatus.PAUSED and paused.waiting_for is not None  # what it waits on is kept
        delivery = send_event(run_id=run.id, name="reply", payload={"text": "hi"}, sender="test")
        assert delivery.created and not delivery.woke  # in its mailbox; the paused run is not woken
        assert status_of(run.id) == RunStatus.PAUSED
        pauses.resume_run(run_id=run.id, user=None, source="command", reason="go on")
        run = ended(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "hi"}]]
    assert calls_in(calls) == ["before"]  # the visit ran again from its checkpoint, reusing its recorded call
