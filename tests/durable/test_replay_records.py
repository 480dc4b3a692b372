"""What a run recorded, as durable_replay reads it (durable/replay_records.py), and a replay of hand-written records:
the visits the checkpoints show (a loop's, a migration's, the current one), an export's round trip, an approval the
code now asks differently. Plain data: no database."""
from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from durable import Context, Workflow
from durable.registry import WorkflowRegistry
from durable.replay_records import RecordedRun, read_export, write_export
from durable.replayer import replay_run

RUN_ID = "00000000-0000-0000-0000-000000000001"
APPROVED = {"amount": "40.00"}


class Refund(BaseModel):
    amount: str = "40.00"
    granted: dict[str, Any] | None = None


def checkpoint(seq: int, step: str, next_step: str) -> dict[str, Any]:
    return {"seq": seq, "step": step, "next_step": next_step, "state": {}, "state_schema_version": 1}


def run_with(checkpoints: list[dict[str, Any]], **records: Any) -> RecordedRun:
    return RecordedRun(RUN_ID, "test-refund-approval", 1, records.pop("status", "SUCCEEDED"), "ORD-1", checkpoints,
                       **records)


def test_the_visits_are_the_checkpoints_steps_with_the_route_each_took():
    run = run_with([checkpoint(0, "", "plan"), checkpoint(1, "plan", "act"), checkpoint(2, "act", "plan"),
                    checkpoint(3, "plan", "")])
    assert [(v.seq, v.step, v.route, v.number) for v in run.visits()] == [
        (0, "plan", "act", 1), (1, "act", "plan", 1), (2, "plan", "", 2)]


def test_the_current_visit_has_no_route_and_a_visit_a_migration_took_over_is_left_out():
    run = run_with([checkpoint(0, "", "plan"), checkpoint(1, "migration v1->v2", "act")], status="WAITING")
    assert [(v.seq, v.step, v.finished) for v in run.visits()] == [(1, "act", False)]
    assert run.unfinished


def test_an_export_reads_back_as_it_was_written():
    run = run_with([checkpoint(0, "", "ask")], calls=[{"step": "ask", "visit": 0, "call_index": 0, "name": "llm",
                                                         "result": {"a": 1}}])
    out = io.StringIO()
    assert write_export([run], out) == 1
    assert list(read_export(io.StringIO(out.getvalue()))) == [run]


# -- an approval the code now asks for another amount ----------------------------------------------------------

workflows = WorkflowRegistry()
refund_approval = workflows.register(Workflow(name="test-refund-approval", version=1, state=Refund, input=Refund))


def revalidate(snapshot: dict[str, Any]) -> None:
    return None


@refund_approval.step
def ask(ctx: Context, state: Refund) -> Refund:
    state.granted = ctx.request_approval("refund", snapshot={"order": "ORD-1"}, approve={"amount": state.amount},
                                         revalidate=revalidate, expires_in=timedelta(days=1))
    return state


def approved_run(amount: str) -> RecordedRun:
    request = {"id": "r-1", "step": "ask", "visit": 0, "position": 1, "ask": 1, "kind": "refund",
               "snapshot": {"order": "ORD-1"}, "snapshot_hash": "s", "object": APPROVED, "object_hash": "o",
               "status": "APPROVED", "reason": "", "approved_by": ["ann"], "decided_at": None}
    run = run_with([checkpoint(0, "", "ask"), checkpoint(1, "ask", "")], approvals=[request])
    run.checkpoints[0]["state"] = {"amount": amount}
    return run


def test_an_approval_asked_as_recorded_replays_with_its_recorded_grant():
    assert replay_run(approved_run("40.00"), workflows).ok


def test_an_approval_the_code_now_asks_for_another_amount_is_a_mismatch_showing_both():
    [mismatch] = replay_run(approved_run("95.00"), workflows).mismatches
    assert (mismatch.step, mismatch.visit, mismatch.what, mismatch.call) == ("ask", 0, "approval", "approval #1")
    assert mismatch.recorded == {"kind": "refund", "object": {"amount": "40.00"}}
    assert mismatch.new == {"kind": "refund", "object": {"amount": "95.00"}}
