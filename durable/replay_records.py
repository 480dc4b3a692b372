"""What a run recorded, as `durable_replay` reads it: from the database, or from an export `durable_export` wrote.

One `RecordedRun` holds a run's checkpoints (where each visit started and the route it took), the calls each visit
recorded (activities, waits, child starts: the journal's `activity` entries), its ledger rows, its approval
requests and its patch answers. It is plain data: written as one JSON line per run, read back the same, so a host
can replay an export of production runs in CI without a production database.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.apps import apps
from django.db.models import Q, QuerySet

from durable.engine.replay import RecordedCall
from durable.engine.states import TERMINAL
from durable.models import Checkpoint, JournalEntry, Run, SideEffect
from durable.store.checkpoints import holds_whole, states_at
from durable.store.values import resolved_all

EXPORT_FORMAT = "durable-replay/1"


@dataclass(frozen=True)
class RecordedVisit:
    """One visit: the step it ran from checkpoint `seq`, that checkpoint's state, and the route it took (None while
    the visit has not finished: the run's current visit)."""

    seq: int
    step: str
    state: dict[str, Any]
    schema_version: int
    route: str | None  # the next step it chose; "" when it ended the run
    number: int  # which visit of its step this is, from 1

    @property
    def finished(self) -> bool:
        return self.route is not None


@dataclass
class RecordedRun:
    run_id: str
    workflow: str
    version: int
    status: str
    business_key: str
    checkpoints: list[dict[str, Any]]  # seq, step, next_step, state, state_schema_version
    calls: list[dict[str, Any]] = field(default_factory=list)  # step, visit, call_index, name, result
    side_effects: list[dict[str, Any]] = field(default_factory=list)  # one per ledger row
    approvals: list[dict[str, Any]] = field(default_factory=list)  # one per approval request (each ask)
    patches: list[dict[str, Any]] = field(default_factory=list)  # step, visit, name, patched
    # A fork's family's first run (durable/forks.py): its operation ids are the family's, and `side_effects` holds
    # the family's rows, those of another run with their "run_id".
    family_root: str | None = None

    @property
    def unfinished(self) -> bool:
        return self.status not in TERMINAL

    def visits(self) -> Iterator[RecordedVisit]:
        """Every visit the checkpoints show, oldest first; a visit a migration took over is left out."""
        points = sorted(self.checkpoints, key=lambda point: point["seq"])
        counts: dict[str, int] = {}
        for point, after in zip(points, [*points[1:], None], strict=True):
            step = point["next_step"]
            if not step:
                continue
            if after is not None and after["step"] != step:
                continue  # a migration's checkpoint: this visit never finished on this version
            counts[step] = counts.get(step, 0) + 1
            route = after["next_step"] if after is not None else None
            yield RecordedVisit(point["seq"], step, point["state"], point["state_schema_version"], route,
                                counts[step])

    def recorded_calls(self, step: str, visit: int) -> list[RecordedCall]:
        return sorted((RecordedCall(c["call_index"], c["name"], c["result"]) for c in self.calls
                       if c["step"] == step and c["visit"] == visit), key=lambda call: call.call_index)

    def side_effect(self, operation_id: str) -> dict[str, Any] | None:
        return next((row for row in self.side_effects if row["operation_id"] == operation_id), None)

    def approval(self, step: str, visit: int, position: int) -> dict[str, Any] | None:
        """The newest ask of the visit's n-th approval request."""
        asks = [a for a in self.approvals if (a["step"], a["visit"], a["position"]) == (step, visit, position)]
        return max(asks, key=lambda a: a["ask"], default=None)

    def patch(self, step: str, visit: int, name: str) -> bool | None:
        found = [p["patched"] for p in self.patches if (p["step"], p["visit"], p["name"]) == (step, visit, name)]
        return found[0] if found else None

    def visit_has_records(self, step: str, visit: int) -> bool:
        """Did this visit record anything (a call, a side effect, an approval) when it ran before?"""
        return (any(c["step"] == step and c["visit"] == visit for c in self.calls)
                or any(r["step"] == step and r["visit"] == visit for r in self.side_effects)
                or any(a["step"] == step and a["visit"] == visit for a in self.approvals))

    def as_json(self) -> dict[str, Any]:
        return {"format": EXPORT_FORMAT, "run_id": self.run_id, "workflow": self.workflow, "version": self.version,
                "status": self.status, "business_key": self.business_key, "checkpoints": self.checkpoints,
                "calls": self.calls, "side_effects": self.side_effects, "approvals": self.approvals,
                "patches": self.patches, **({"family_root": self.family_root} if self.family_root else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordedRun:
        if data.get("format") != EXPORT_FORMAT:
            raise ValueError(f"not a durable_export line (format {data.get('format')!r}, expected {EXPORT_FORMAT!r})")
        return cls(data["run_id"], data["workflow"], int(data["version"]), data["status"], data["business_key"],
                   data["checkpoints"], data["calls"], data["side_effects"], data["approvals"], data["patches"],
                   data.get("family_root"))


def write_export(runs: Iterable[RecordedRun], out: IO[str]) -> int:
    """One JSON line per run; how many were written."""
    written = 0
    for run in runs:
        out.write(json.dumps(run.as_json(), sort_keys=True, default=str) + "\n")
        written += 1
    return written


def read_export(lines: Iterable[str]) -> Iterator[RecordedRun]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                yield RecordedRun.from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"line {number}: {exc}") from None


def from_database(runs: QuerySet[Run]) -> Iterator[RecordedRun]:
    """The runs' records, one run at a time (a few queries each)."""
    for run in runs.iterator(chunk_size=200):
        yield RecordedRun(str(run.id), run.workflow_name, run.workflow_version, run.status, run.business_key,
                          _checkpoints(run), _calls(run), _side_effects(run), _approvals(run), _patches(run),
                          str(run.family_root) if run.family_root else None)


def _checkpoints(run: Run) -> list[dict[str, Any]]:
    """Each checkpoint with its whole state (a difference's row holds none: docs/state-storage.md)."""
    rows: list[dict[str, Any]] = [dict(row) for row in Checkpoint.objects.filter(run=run).order_by("seq").values(
        "seq", "step", "next_step", "state", "state_schema_version")]
    states = states_at(run.id, [row["seq"] for row in rows if not holds_whole(row["state"])])
    for row in rows:
        if not holds_whole(row["state"]):
            row["state"] = states.get(row["seq"])
    return rows


def _calls(run: Run) -> list[dict[str, Any]]:
    rows = list(JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).values(
        "step", "visit", "call_index", "name", "result"))
    for row, result in zip(rows, resolved_all([row["result"] for row in rows]), strict=True):
        row["result"] = result  # large values stored apart, read back
    newest: dict[str, int] = {}  # results recorded before visits existed belong to the newest visit of their step
    for point in Checkpoint.objects.filter(run=run).exclude(next_step="").values("seq", "next_step"):
        newest[point["next_step"]] = max(newest.get(point["next_step"], 0), point["seq"])
    return [{**row, "visit": row["visit"] if row["visit"] is not None else newest.get(row["step"], 0)}
            for row in rows]


def _side_effects(run: Run) -> list[dict[str, Any]]:
    """The run's ledger rows; a fork's, with those of the other runs of its family (each naming its run)."""
    fields = ("operation_id", "step", "visit", "action_name", "business_key", "request_hash", "payload", "status",
              "result_json", "external_ref", "last_error")
    own = [dict(row) for row in SideEffect.objects.filter(run=run).values(*fields)]
    if run.family_root is None:
        return own
    family = Run.objects.filter(Q(id=run.family_root) | Q(family_root=run.family_root)).exclude(id=run.id)
    return own + [{**row, "run_id": str(row["run_id"])} for row in
                  SideEffect.objects.filter(run__in=family.values("id")).values(*fields, "run_id")]


def _approvals(run: Run) -> list[dict[str, Any]]:
    if not apps.is_installed("approvals"):
        return []
    requests = apps.get_model("approvals", "ApprovalRequest").objects.filter(run=run)
    rows = []
    for request in requests.prefetch_related("decisions__user"):
        approvers = [d.user.username for d in request.decisions.all() if d.verdict == "approve"]
        rows.append({"id": str(request.id), "step": request.step, "visit": request.visit,
                     "position": request.position, "ask": request.ask, "kind": request.kind,
                     "snapshot": request.snapshot, "snapshot_hash": request.snapshot_hash,
                     "object": request.approval_object, "object_hash": request.object_hash,
                     "status": request.status, "reason": request.reason, "approved_by": approvers,
                     "decided_at": request.decided_at.isoformat() if request.decided_at else None})
    return rows + _refused_on_their_facts(run)


def _refused_on_their_facts(run: Run) -> list[dict[str, Any]]:
    """Requests refused before anyone was asked (their preconditions failed): the journal's, as approvals/gate.py
    wrote them; replayed as the same refusal."""
    entries = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.APPROVAL,
                                          detail__event="precondition failed")
    details = [(e.step, e.visit, e.detail or {}) for e in entries]
    return [{"id": "", "step": step, "visit": visit, "position": detail.get("position"), "ask": 0,
             "kind": detail.get("kind"), "status": "PRECONDITION_FAILED",
             "problems": list(detail.get("problems") or ())} for step, visit, detail in details]


def _patches(run: Run) -> list[dict[str, Any]]:
    entries = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.PATCH)
    return [{"step": e.step, "visit": e.visit, "name": e.name, "patched": bool((e.detail or {}).get("patched"))}
            for e in entries]
