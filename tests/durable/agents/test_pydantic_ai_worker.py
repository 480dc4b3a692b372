"""DurableAgent on real worker processes: a SIGKILL in the middle of an agent run, and a crash at each fault point of
a side-effect tool, resume without asking the model again for what it answered and without doing anything twice."""
from __future__ import annotations

from pathlib import Path

import pytest

from durable import services
from durable.agents.pydantic_ai import MODEL_ACTIVITY
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime.fault_points import FAULT_POINTS
from durable.tools.processes import WorkerProcess
from tests.durable.agents import agent_workflows as aw
from tests.durable.workflows import calls_in
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("agent_workers")]

FAST_LEASE = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1",
              "DURABLE_HTTP_TIMEOUT_SECONDS": "1"}


def start(scenario: str, **extra: str) -> Run:
    run, _ = services.start_run(workflow=aw.NAME, business_key="ORD-1004",
                                input={"order_id": "ORD-1004", "scenario": scenario, **extra})
    return run


def model_requests(run: Run) -> list[int]:
    return list(JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, name=MODEL_ACTIVITY)
                .order_by("call_index").values_list("call_index", flat=True))


def test_a_worker_killed_in_the_middle_of_an_agent_run_resumes_without_asking_the_model_again(
        sandbox, own_queue, tmp_path, worker_log_dir):
    calls, hold = tmp_path / "model-calls", tmp_path / "hold"
    hold.touch()  # the agent's `hold` tool waits while this file exists: the worker is killed inside it
    env = {aw.CALLS: str(calls), **FAST_LEASE}
    doomed = WorkerProcess(env=env, log_path=worker_log_dir / "agent-doomed.log", name="agent-doomed").start()
    try:
        run = start("hold", hold_file=str(hold))
        wait_for(lambda: len(model_requests(run)) == 2, what="the agent to ask its model twice, then call `hold`")
        doomed.kill()
    finally:
        doomed.stop()
    assert len(calls_in(calls)) == 2 and status_of(run.id) == RunStatus.RUNNING
    hold.unlink()

    # Nobody re-sends the run: the rescuer's sweeper finds the dead worker's lease expired.
    with WorkerProcess(env=env, beat=True, log_path=worker_log_dir / "agent-rescuer.log", name="agent-rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the rescued agent run", timeout=60)

    run.refresh_from_db()
    # The two requests answered before the kill were replayed; the agent went on live from `hold`.
    assert len(calls_in(calls)) == 4 and model_requests(run) == [0, 2, 4, 6]
    assert sandbox.state.calls_snapshot()["orders"]["calls"] == 1  # read_order, answered before the kill: once
    assert run.output["answer"].startswith("done: ")


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_side_effect_tool_is_performed_once_across_a_worker_crash_at_each_fault_point(
        sandbox, own_queue, tmp_path, worker_log_dir, point):
    calls = tmp_path / "model-calls"
    env = {aw.CALLS: str(calls), "DURABLE_FAULT_POINTS": point, "DURABLE_FAULT_ACTIONS": "refund",
           "DURABLE_FAULT_DIR": str(tmp_path / "faults"), **FAST_LEASE}
    doomed = WorkerProcess(env=env, log_path=worker_log_dir / f"agent-{point}.log", name=f"agent-{point}").start()
    try:
        run = start("refund")
        wait_for(lambda: doomed.process is not None and doomed.process.poll() is not None,
                 what=f"the worker to crash at {point}")
    finally:
        doomed.stop()
    assert [path.name.split(".")[-1] for path in Path(tmp_path / "faults").iterdir()] == [point]

    with WorkerProcess(env=env, beat=True, log_path=worker_log_dir / f"agent-{point}-rescuer.log",
                       name=f"agent-{point}-rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, what="the rescued agent run", timeout=60)

    assert sandbox.state.calls_snapshot()["payments"]["effects"] == 1 and len(sandbox.state.list_refunds()) == 1
    assert SideEffect.objects.get(run=run).status == Op.SUCCEEDED
    assert len(calls_in(calls)) == 3  # two requests before the crash (replayed), one after the refund
