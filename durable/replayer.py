"""`durable_replay`: re-execute recorded runs against the code as it is now, every call answered from the record.

Each visit a run recorded is run again from the checkpoint it started from, with a context (`ReplayContext`, a
`durable.Context`) that answers every activity, wait, child start, side effect and approval from the record and
calls nothing, writes nothing. Where the code now asks for something else (another call, a side effect with another
request, another approval, another route) the replay says so: run, visit, call, the recorded and the new
(`durable.engine.replay.Mismatch`). A visit the record stops in (the run's current one: it waits, or crashed) is
replayed up to where its record ends, which is where the worker would go live.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar
from uuid import UUID

from pydantic import BaseModel

from durable.context import Call, Context, Effect
from durable.downstream import Downstream
from durable.engine.contract import Refusal, upcast
from durable.engine.costs import UsageOf
from durable.engine.errors import (
    ApprovalPreconditionFailed,
    ApprovalRejected,
    ChildKeyTaken,
    ChildRunFailed,
    NonRetryableError,
    OperationConflict,
)
from durable.engine.ids import family_operation_id, request_hash
from durable.engine.replay import Mismatch, ReplayCursor, ReplayMismatch, history_goes_past, payload_difference
from durable.engine.waits import ChildRun, Event
from durable.registry import UnknownWorkflow, WorkflowRegistry, registry
from durable.replay_records import RecordedRun, RecordedVisit
from durable.runtime.visit import to_json
from durable.runtime.waits import SLEEP, START_CHILD, WAIT_CHILD, WAIT_FOR_EVENT
from durable.workflow import Workflow

T = TypeVar("T", bound=BaseModel)


class EndOfRecord(Exception):
    """The visit's record ends here: a worker would go live (or wait) from this point."""


@dataclass
class RunReplay:
    """What replaying one run found."""

    run_id: str
    workflow: str
    version: int
    visits: int = 0  # visits replayed
    mismatches: list[Mismatch] = field(default_factory=list)
    patches: dict[str, bool] = field(default_factory=dict)  # the patches its replayed visits asked, and the answers
    problem: str = ""  # why it could not be replayed at all (its version is not registered here, ...)

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.problem


def replay_runs(runs: Iterable[RecordedRun], workflows: WorkflowRegistry = registry, *,
                current_visit_only: bool = False) -> Iterator[RunReplay]:
    for run in runs:
        yield replay_run(run, workflows, current_visit_only=current_visit_only)


def replay_run(run: RecordedRun, workflows: WorkflowRegistry = registry, *,
               current_visit_only: bool = False) -> RunReplay:
    """Replay each recorded visit of `run` (or only the one a worker would run again) on the registered code."""
    report = RunReplay(run.run_id, run.workflow, run.version)
    try:
        workflow = workflows.get(run.workflow, run.version)
    except UnknownWorkflow:
        report.problem = f"{run.workflow} v{run.version} is not registered here"
        return report
    visits = list(run.visits())
    if current_visit_only:
        visits = [visit for visit in visits if not visit.finished]
    for visit in visits:
        report.visits += 1
        mismatch = replay_visit(run, workflow, visit, report.patches)
        if isinstance(mismatch, Refusal):
            report.problem = mismatch.message
            break
        if mismatch is not None:
            report.mismatches.append(mismatch)
    return report


def replay_visit(run: RecordedRun, workflow: Workflow, visit: RecordedVisit,
                 patches: dict[str, bool] | None = None) -> Mismatch | Refusal | None:
    """Run the visit's step again on its recorded state; the first mismatch, if the code now asks another thing.
    The patches it asks are added to `patches`, with their answers."""
    try:
        step = workflow.get_step(visit.step)
    except KeyError:
        return Refusal("topology_changed", f"{workflow.name} v{workflow.version} has no step {visit.step!r}")
    readable = upcast(visit.state, visit.schema_version, workflow.checkpoint_schema_version, workflow.upcasters)
    if isinstance(readable, Refusal):
        return readable
    ctx = ReplayContext(run, workflow, visit, patches)
    try:
        returned = step.fn(ctx, workflow.state.model_validate(readable))
        route, _ = workflow.graph.choose(step.name, returned)
    except EndOfRecord:
        return ctx.cursor.mismatch
    except ReplayMismatch as mismatch:
        return mismatch.mismatch
    except Exception as exc:  # noqa: BLE001  the step fails where it went on: its code changed
        if ctx.cursor.mismatch is not None or not visit.finished:
            return ctx.cursor.mismatch  # an unfinished visit may have failed live too (its retry)
        return Mismatch(visit.step, visit.seq, "error", "the step", _route(visit.route),
                        f"{type(exc).__name__}: {exc}")
    if ctx.cursor.mismatch is not None:
        return ctx.cursor.mismatch
    if visit.finished and (route or "") != visit.route:
        return Mismatch(visit.step, visit.seq, "route", "route", _route(visit.route), _route(route or ""))
    return None


def _route(route: str | None) -> str:
    return f"to {route!r}" if route else "the end of the run"


class ReplayContext:
    """A `durable.Context` that answers from a visit's record and calls nothing."""

    def __init__(self, run: RecordedRun, workflow: Workflow, visit: RecordedVisit,
                 patches: dict[str, bool] | None = None) -> None:
        self._run, self._workflow, self._visit = run, workflow, visit
        self.patches_asked = patches if patches is not None else {}
        self.cursor = ReplayCursor(visit.step, run.recorded_calls(visit.step, visit.seq), visit.seq)
        self.run_id = UUID(run.run_id)
        self.business_key = run.business_key
        self.workflow_name = run.workflow
        self.workflow_version = run.version
        self.step = visit.step
        self.attempt = 1
        self.visit = visit.seq
        self.visit_number = visit.number
        self._approvals_asked = 0

    @property
    def replayed_calls(self) -> int:
        return self.cursor.reused

    def patched(self, name: str) -> bool:
        """As the worker answered: the recorded answer; without one, False for a finished visit (the code that
        recorded it had no patch) and, for the current visit, what a worker would answer now."""
        answer = self._run.patch(self.step, self.visit, name)
        if answer is None and self._visit.finished:
            answer = False
        if answer is None:
            operations = {row["operation_id"] for row in self._run.side_effects
                          if (row["step"], row["visit"]) == (self.step, self.visit)}
            positions = {a["position"] for a in self._run.approvals
                         if (a["step"], a["visit"]) == (self.step, self.visit)}
            answer = not history_goes_past(self.cursor, operations, positions, self._approvals_asked)
        self.patches_asked.setdefault(name, answer)
        return answer

    def _answer(self, name: str) -> Any:
        index, recorded = self.cursor.next_call(name)
        if recorded is None:
            self._end(f"call #{index}", f"{name!r} (nothing more recorded)", repr(name))
        return recorded.result

    def _end(self, call: str, recorded: str, new: Any) -> NoReturn:
        """Nothing recorded here: where a worker goes live, unless the visit had finished without asking this."""
        if self._visit.finished:
            raise self.cursor.mismatched(Mismatch(self.step, self.visit, "call", call,
                                                  "nothing: the visit finished without it", new))
        raise EndOfRecord(recorded)

    def activity(self, name: str, fn: Callable[..., Any], *args: Any, returns: type[T] | None = None,
                 usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Any:
        result = self._answer(name)
        return returns.model_validate(result) if returns is not None else result

    def call(self, name: str, fn: Callable[..., Any], *args: Any, returns: type | None = None,
             usage: UsageOf | None = None, limit: str | None = None, **kwargs: Any) -> Call:
        return Call(name, fn, args, kwargs, returns, usage, limit)

    def effect(self, action: str, *, business_key: str, downstream: Downstream, payload: dict[str, Any]) -> Effect:
        return Effect(action, business_key, downstream, payload)

    def parallel(self, *calls: Call | Effect) -> list[Any]:
        results = []
        for call in calls:  # indexes taken and side effects prepared in the order given, as a worker does
            if isinstance(call, Call):
                result = self._answer(call.name)
                results.append(call.returns.model_validate(result) if call.returns is not None  # type: ignore[attr-defined]
                               else result)
            else:
                results.append(self.side_effect(call.action, business_key=call.business_key,
                                                downstream=call.downstream, payload=call.payload))
        return results

    def side_effect(self, action: str, *, business_key: str, downstream: Downstream,
                    payload: dict[str, Any]) -> dict[str, Any]:
        op_id = family_operation_id(self._run.run_id, self._run.family_root, action, business_key)
        row = self._run.side_effect(op_id)
        what = f"side effect {action!r} for {business_key}"
        if row is None:
            self._end(what, "nothing recorded", to_json(payload))
        asked = to_json(payload)
        if row["request_hash"] != request_hash(asked):
            if ("run_id" not in row and (row["step"], row["visit"]) == (self.step, self.visit)
                    and op_id not in self.cursor.prepared):  # a row of another run of a fork's family: a conflict
                recorded, new = payload_difference(row["payload"], asked)
                raise self.cursor.mismatched(Mismatch(self.step, self.visit, "side_effect", what, recorded, new))
            raise OperationConflict(f"operation {op_id} ({action} for {business_key}) was prepared with request hash "
                                    f"{row['request_hash']} and is now asked with {request_hash(asked)}; a changed "
                                    "request needs a new business key")
        self.cursor.prepared.add(op_id)
        if row["status"] == "SUCCEEDED":
            return {**(row["result_json"] or {}), "external_ref": row["external_ref"]}
        if row["status"] == "FAILED_FINAL":
            raise NonRetryableError(f"operation {op_id} ({action}) failed for good: {row['last_error']}",
                                    kind="side_effect_failed")
        raise EndOfRecord(f"{what} is {row['status']}")  # a worker would re-enter it live

    def request_approval(self, kind: str, *, snapshot: dict[str, Any] | Callable[[], dict[str, Any]],
                         approve: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]],
                         revalidate: Callable[[dict[str, Any]], Any], expires_in: timedelta,
                         on_invalid: str = "ask_again", on_expiry: str = "fail",
                         approvers: int | Callable[[dict[str, Any]], int] = 1) -> dict[str, Any]:
        self._approvals_asked += 1
        where = f"approval #{self._approvals_asked}"
        asked = self._run.approval(self.step, self.visit, self._approvals_asked)
        if asked is None:
            self._end(where, "nothing recorded", kind)
        if asked["status"] == "PRECONDITION_FAILED":  # refused on its facts before anyone was asked: the same again
            if asked["kind"] != kind:
                raise self.cursor.mismatched(Mismatch(self.step, self.visit, "approval", where,
                                                      {"kind": asked["kind"]}, {"kind": kind}))
            raise ApprovalPreconditionFailed(kind, tuple(asked["problems"]))
        new = to_json(approve(asked["snapshot"]) if callable(approve) else approve)
        if asked["kind"] != kind or asked["object"] != new:
            recorded_object, new_object = payload_difference(asked["object"], new)
            raise self.cursor.mismatched(Mismatch(self.step, self.visit, "approval", where,
                                                  {"kind": asked["kind"], "object": recorded_object},
                                                  {"kind": kind, "object": new_object}))
        if asked["status"] == "APPROVED":
            return {"request": asked["id"], "approved_by": asked["approved_by"], "object": asked["object"],
                    "snapshot_hash": asked["snapshot_hash"], "object_hash": asked["object_hash"],
                    "decided_at": asked["decided_at"]}
        if asked["status"] == "REJECTED":
            raise ApprovalRejected(f"{kind} was rejected: {asked['reason']}")
        raise EndOfRecord(f"{where} is {asked['status']}")

    def stream(self, data: Any, *, kind: str | None = None) -> None:
        """Nothing: a stream is not the journal, and a replay publishes nothing to a run's followers."""

    def sleep(self, duration: timedelta) -> None:
        self._answer(SLEEP)

    def sleep_until(self, until: datetime) -> None:
        self._answer(SLEEP)

    def wait_for_event(self, names: str | Sequence[str], *, timeout: timedelta | None = None) -> Event | None:
        result = self._answer(WAIT_FOR_EVENT)
        return Event.from_json(result["event"]) if "event" in result else None

    def start_child(self, workflow: str, *, input: dict[str, Any], business_key: str) -> ChildRun:
        result = self._answer(START_CHILD)
        if "refused" in result:  # the key was taken: the same refusal, as the worker answers it (runtime/waits.py)
            raise ChildKeyTaken(workflow, business_key, result.get("holder"), result["refused"])
        return ChildRun(**result)

    def wait_child(self, child: ChildRun) -> Any:
        return self.wait_children([child])[0]

    def wait_children(self, children: Sequence[ChildRun]) -> list[Any]:
        if not children:
            return []
        ended = self._answer(WAIT_CHILD)
        for child in ended:
            if child["status"] != "SUCCEEDED":
                raise ChildRunFailed(child["run_id"], child["workflow"], child["status"], child["error"])
        return [child["output"] for child in ended]


if TYPE_CHECKING:  # mypy proves the replay's context is a durable.Context, as the worker's is
    _IS_A_CONTEXT: type[Context] = ReplayContext
