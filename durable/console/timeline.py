"""A run's history in time order: checkpoints, activities, side effects, retries, approvals, waits, events
received, child runs started, operator actions.

A step run again (after a crash or a retry) returns its recorded activity results instead of
calling again; the executor journals that once per step as "activity_reused", shown here as
reused from history. A side effect asked for again is journaled as a prevented duplicate. Each
entry carries the time since the one before it. Journal entries of kind "operator" are left out: the operator action audit trail holds
the same events with who, before and after. A wait's outcome is recorded twice in one transaction, as the visit's
call (what the visit returns when it runs again) and as "wait_ended"; the timeline shows the one entry, with the
call's record as its detail.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from durable.console.run_page import current_statuses
from durable.engine.costs import decimal_text, read_usage
from durable.engine.graph import Graph
from durable.engine.ledger import OperationStatus
from durable.engine.topology import shapes_from_json
from durable.engine.waits import WaitingFor
from durable.models import Checkpoint, JournalEntry, OperatorAction, Run, SideEffect
from durable.runtime.waits import SLEEP, START_CHILD, WAIT_CHILD, WAIT_FOR_EVENT
from durable.store.values import fill_results
from durable.templatetags.console_time import absolute

# A side effect in these states waits for reconciliation (the reconciler's, or an operator's).
UNRESOLVED = frozenset({OperationStatus.STARTED, OperationStatus.UNKNOWN})
APPROVAL_EVENTS = {"approval_used": "used after revalidation"}
WAIT_CALLS = frozenset({SLEEP, WAIT_FOR_EVENT, START_CHILD, WAIT_CHILD})  # a step's waits, recorded as its calls


class EntryKind(StrEnum):
    CHECKPOINT = "checkpoint"
    ACTIVITY = "activity"
    PARALLEL = "parallel"  # a group of calls made at once (ctx.parallel), its calls nested under it
    SIDE_EFFECT = "side_effect"
    RECONCILIATION = "reconciliation"
    RETRY = "retry"
    APPROVAL = "approval"
    OPERATOR = "operator"
    FAILURE = "failure"
    NEEDS_ATTENTION = "needs_attention"
    BLOCKED = "blocked"
    WAIT = "wait"  # parked on a timer, events or child runs
    WAIT_ENDED = "wait_ended"
    EVENT = "event"  # an event from outside arrived in the run's mailbox
    CHILD_RUN = "child_run"  # a child run started
    NOTE = "note"  # a journal kind this screen does not know yet


@dataclass(frozen=True)
class Entry:
    at: datetime
    kind: EntryKind
    step: str
    summary: str
    detail: Any = None
    status: str = ""  # what the entry's side effect or approval request is now
    operation_id: str = ""
    approval_id: str = ""
    checkpoint_seq: int | None = None
    reconcile: bool = False  # the operation is still STARTED or UNKNOWN: link it to reconciliation
    after: timedelta | None = None  # since the entry before it; None for the first
    order: tuple[int, int] = field(default=(0, 0), repr=False)  # ties on `at`: ledger, journal, checkpoint, audit
    visit: str = ""  # the visit it belongs to, "act #3", where its step was visited more than once
    calls: tuple[Entry, ...] = ()  # a parallel group's calls, nested under the entry that started them
    run_link: str = ""  # another run the entry names (a child run started): its page is linked
    run_link_label: str = "the child run"  # or a fork's origin, a fork, the run of a family that did it

    @property
    def label(self) -> str:
        return self.kind.value.replace("_", " ")


def run_timeline(run: Run) -> list[Entry]:
    """Every recorded event of the run, oldest first."""
    ledger = list(run.side_effects.all())
    graph = _graph(run)
    statuses = current_statuses(run)  # of what the apps' journal entries name (durable/console/run_page.py)
    checkpoints = list(run.checkpoints.defer("state"))
    visits = visit_names(checkpoints)
    recorded = list(run.journal.exclude(kind=JournalEntry.Kind.OPERATOR))
    fill_results(recorded)  # large values stored apart, read back (durable.store.values)
    journal, wait_records = _without_wait_records(recorded)
    statuses.update(_children_statuses(run, journal))
    entries = [
        *(_ledger_row(row, visits) for row in ledger),
        *(_journal(entry, statuses, visits, wait_records) for entry in journal),
        *(_checkpoint(cp, graph, visits) for cp in checkpoints),
        *(_operator_action(action) for action in run.operator_actions.all()),
        *(_forked(fork) for fork in run.forks.only("id", "created_at", "forked_at_seq")),
    ]
    unresolved = {row.operation_id for row in ledger if row.status in UNRESOLVED}
    entries = [replace(e, reconcile=True) if e.operation_id in unresolved else e for e in entries]
    return with_gaps(_nested(sorted(entries, key=lambda e: (e.at, e.order)), *parallel_groups(journal)))


def with_gaps(entries: list[Entry]) -> list[Entry]:
    """Each entry with the time since the one before it, so a slow step or a long wait stands out."""
    return [replace(entry, after=entry.at - entries[i - 1].at) if i else entry for i, entry in enumerate(entries)]


def _ledger_row(row: SideEffect, visits: dict[int, str]) -> Entry:
    detail = {"downstream": row.downstream, "business_key": row.business_key, "external_ref": row.external_ref,
              "attempts": row.attempts, "duplicates_prevented": row.duplicates_prevented,
              "last_error": row.last_error, "resolution_evidence": row.resolution_evidence or None}
    return Entry(row.created_at, EntryKind.SIDE_EFFECT, row.step, f"side effect {row.action_name} prepared",
                 detail=detail, status=row.status, operation_id=row.operation_id, order=(0, 0),
                 visit=visit_label(visits, row.visit))


def _graph(run: Run) -> Graph | None:
    """The graph the run is pinned to, from its recorded topology (None for a run recorded without one)."""
    try:
        return Graph(shapes_from_json(run.topology or []))
    except (ValueError, KeyError, TypeError):
        return None


def _checkpoint(cp: Checkpoint, graph: Graph | None, visits: dict[int, str]) -> Entry:
    done = "run started" if cp.seq == 0 else f"{cp.step} done"
    summary = f"checkpoint #{cp.seq}: {done} → {cp.next_step or 'end'}"
    if cp.seq and graph is not None and graph.is_chosen(cp.step, cp.next_step or None):
        summary += f" (route {cp.step} -> {cp.next_step or 'end'})"  # the step chose it: a branch, a loop, a finish
    # A checkpoint ends the visit that started from the one before it (a migration's ends none).
    ended = visit_label(visits, cp.seq - 1) if cp.seq else ""
    return Entry(cp.created_at, EntryKind.CHECKPOINT, cp.step, summary, checkpoint_seq=cp.seq, order=(2, cp.seq),
                 visit=ended if ended.startswith(f"{cp.step} #") else "")


def _operator_action(action: OperatorAction) -> Entry:
    who = action.actor_username or "system"
    summary = f"{who} {action.action} ({action.status_before} → {action.status_after}) from {action.source}"
    detail = {"reason": action.reason, **(action.detail or {})} if action.reason or action.detail else None
    origin = (action.detail or {}).get("origin", "") if action.action == "fork_run" else ""  # a fork names its origin
    return Entry(action.created_at, EntryKind.OPERATOR, "", summary + (f": {action.reason}" if action.reason else ""),
                 detail=detail, operation_id=action.operation_id, order=(3, action.id), run_link=str(origin),
                 run_link_label="the run it was forked from")


def _forked(fork: Run) -> Entry:
    """A run forked from this one (durable/forks.py): where it started, its page linked (its audit row is its own)."""
    return Entry(fork.created_at, EntryKind.OPERATOR, "", f"forked from checkpoint #{fork.forked_at_seq} into a new run",
                 order=(3, 0), run_link=str(fork.id), run_link_label="the fork")


def visit_names(checkpoints: list[Checkpoint]) -> dict[int, str]:
    """Each visit by the seq of the checkpoint it started from, named as the step, its ordinal and how many
    visits the step has had: "act #3 of 5". The timeline says "act #3" where a step was visited more than once."""
    ordered = sorted((cp for cp in checkpoints if cp.next_step), key=lambda cp: cp.seq)
    totals = Counter(cp.next_step for cp in ordered)
    made: Counter[str] = Counter()
    names = {}
    for cp in ordered:
        made[cp.next_step] += 1
        names[cp.seq] = f"{cp.next_step} #{made[cp.next_step]} of {totals[cp.next_step]}"
    return names


def visit_label(visits: dict[int, str], seq: int | None) -> str:
    """The visit `seq` started, "act #3", where its step was visited more than once; else ""."""
    name = visits.get(seq) if seq is not None else None
    return "" if name is None or name.endswith(" #1 of 1") else name.partition(" of ")[0]


def _without_wait_records(journal: list[JournalEntry]) -> tuple[list[JournalEntry], dict[tuple[Any, ...], Any]]:
    """The journal without the calls that record a wait's outcome (a wait_ended or child_started entry says the
    same), and those calls' results by (visit, call index), for the entry that shows them."""
    kept, records = [], {}
    for entry in journal:
        if entry.kind == JournalEntry.Kind.ACTIVITY and entry.name in WAIT_CALLS:
            records[(entry.visit, entry.call_index)] = entry.result
        else:
            kept.append(entry)
    return kept, records


def _children_statuses(run: Run, journal: list[JournalEntry]) -> dict[str, str]:
    """The status now of each child run the journal says the run started: one query, only if it started any."""
    if not any(entry.kind == JournalEntry.Kind.CHILD_STARTED for entry in journal):
        return {}
    return {str(child_id): status for child_id, status in
            Run.objects.filter(parent_run_id=run.id).values_list("id", "status")}


def _journal(entry: JournalEntry, statuses: dict[str, str], visits: dict[int, str],
             wait_records: dict[tuple[Any, ...], Any] | None = None) -> Entry:
    detail = entry.detail or {}
    kind, summary, status = _describe(entry, detail, statuses)
    shown = entry.result if entry.kind == JournalEntry.Kind.ACTIVITY else entry.detail
    if entry.kind == JournalEntry.Kind.WAIT_ENDED and (entry.visit, entry.call_index) in (wait_records or {}):
        shown = {"ended": entry.detail, "returned": (wait_records or {})[(entry.visit, entry.call_index)]}
    if entry.kind == JournalEntry.Kind.DUPLICATE_PREVENTED and detail.get("done_in_visit") in visits:
        done_in = visits[detail["done_in_visit"]].partition(" of ")[0]
        summary = f"side effect {entry.name} asked again: already done in {done_in}, the recorded result was reused"
    if entry.kind == JournalEntry.Kind.DUPLICATE_PREVENTED and detail.get("done_in_run"):
        summary = f"side effect {entry.name}: done in run {detail['done_in_run']}, its recorded result was reused"
    return Entry(entry.created_at, kind, entry.step, summary, detail=shown, status=status,
                 operation_id=detail.get("operation_id", ""),
                 approval_id=detail.get("request", "") if kind == EntryKind.APPROVAL else "", order=(1, entry.id),
                 visit=visit_label(visits, entry.visit),
                 run_link=str(detail.get("run_id", "")) if kind == EntryKind.CHILD_RUN
                 else str(detail.get("done_in_run", "")),
                 run_link_label="the child run" if kind == EntryKind.CHILD_RUN else "the run that did it")


def _describe(entry: JournalEntry, detail: dict[str, Any], statuses: dict[str, str]) -> tuple[EntryKind, str, str]:
    """The entry's kind on the timeline, its one line in an operator's words, and its request's status now."""
    error = detail.get("error") or detail
    problem = f"{error.get('kind', 'error')}: {error.get('message', '')}"
    Kind = JournalEntry.Kind
    match entry.kind:
        case Kind.ACTIVITY:
            return EntryKind.ACTIVITY, f"activity {entry.name} #{entry.call_index} recorded{_usage(detail)}", ""
        case Kind.PARALLEL:
            calls = ", ".join(f"{call['name']} #{call['call_index']}" if "name" in call else str(call.get("action"))
                              for call in detail.get("calls", []))
            return EntryKind.PARALLEL, f"parallel: {calls} started together", ""
        case Kind.ACTIVITY_REUSED:
            calls = ", ".join(f"{call.get('name')} #{call.get('call_index')}" for call in detail.get("calls", []))
            return EntryKind.ACTIVITY, f"step ran again: activity {calls} reused from history, not called again", ""
        case Kind.SIDE_EFFECT:
            ref = f" ({detail['external_ref']})" if detail.get("external_ref") else ""
            return EntryKind.SIDE_EFFECT, f"side effect {entry.name} → {detail.get('status')}{ref}", ""
        case Kind.DUPLICATE_PREVENTED:
            summary = f"side effect {entry.name} asked again: duplicate prevented, the recorded result was reused"
            return EntryKind.SIDE_EFFECT, summary, ""
        case Kind.RECONCILIATION:
            return EntryKind.RECONCILIATION, f"reconciliation of {entry.name}: {detail.get('decision')}", ""
        case Kind.RETRY_SCHEDULED:
            summary = f"attempt {detail.get('attempt')} failed: {problem}; retry in {detail.get('delay_seconds')} s"
            return EntryKind.RETRY, summary, ""
        case Kind.FAILED if error.get("kind") == "step_budget_exhausted":
            return EntryKind.FAILURE, f"stopped by the step budget after {error.get('visits')} visits: {problem}", ""
        case Kind.FAILED:
            return EntryKind.FAILURE, f"failed at attempt {detail.get('attempt')}: {problem}", ""
        case Kind.NEEDS_ATTENTION:
            return EntryKind.NEEDS_ATTENTION, f"needs attention: {detail.get('message', '')}", ""
        case Kind.CONTRACT_BLOCKED | Kind.REPLAY_VIOLATION:
            return EntryKind.BLOCKED, f"blocked on the replay contract: {problem}", ""
        case Kind.APPROVAL:
            event = str(detail.get("event", ""))
            return EntryKind.APPROVAL, f"approval {APPROVAL_EVENTS.get(event, event)}", statuses.get(
                detail.get("request", ""), "")
        case Kind.WAIT:
            return EntryKind.WAIT, f"waits for {_waited_for(detail)}", ""
        case Kind.WAIT_ENDED:
            return EntryKind.WAIT_ENDED, _wait_ended(detail), ""
        case Kind.EVENT_RECEIVED:
            woke = "woke the run" if detail.get("woke_run") else "kept in the mailbox until a wait takes it"
            sender = f" from {detail['sender']}" if detail.get("sender") else ""
            return EntryKind.EVENT, f"event {entry.name!r} received{sender}: {woke}", ""
        case Kind.CHILD_STARTED:
            key = f" (business key {detail['business_key']})" if detail.get("business_key") else ""
            return EntryKind.CHILD_RUN, f"child run started: {detail.get('workflow', entry.name)}{key}", statuses.get(
                str(detail.get("run_id", "")), "")
    return EntryKind.NOTE, f"{entry.kind} {entry.name}".strip(), ""


# -- Waits: what a WAIT entry waited for, and how a WAIT_ENDED entry says it ended -------------------------------

def _when(value: Any) -> str:
    """An ISO time from the journal in the operator's zone; as recorded if it is not one."""
    try:
        return absolute(datetime.fromisoformat(str(value)))
    except ValueError:
        return str(value)


def _names(names: Any) -> str:
    return " or ".join(repr(name) for name in names or ())


def _waited_for(detail: dict[str, Any]) -> str:
    try:
        return WaitingFor.from_json(detail).describe(absolute)
    except (KeyError, TypeError, ValueError):  # written by a newer or broken version
        return str(detail.get("kind", "something"))


def _wait_ended(detail: dict[str, Any]) -> str:
    if detail.get("timer"):
        return f"timer {detail['timer']} (due {_when(detail.get('due'))})"
    if "consumed" in detail:
        sender = f", sent by {detail['sender']}" if detail.get("sender") else ""
        return f"event {detail.get('event')!r} consumed (#{detail['consumed']}{sender})"
    if "timeout" in detail:
        return (f"deadline passed ({_when(detail['timeout'])}) without event {_names(detail.get('events'))}: "
                "the step goes on without it")
    if "children" in detail:
        ended = Counter((detail.get("children") or {}).values())
        return "child runs ended: " + ", ".join(f"{count} {status}" for status, count in sorted(ended.items()))
    return "wait ended"
def _usage(detail: dict[str, Any]) -> str:
    """A model call's usage, as its entry's summary ends: "; model gpt-4o-mini, 1,200 in + 300 out tokens, cost …"."""
    priced = read_usage(detail.get("usage"))
    if priced is None:
        return ""
    usage = priced.usage
    cost = "unknown (no price)" if priced.cost is None else decimal_text(priced.cost)
    return (f"; model {usage.model}, {usage.input_tokens:,} in + {usage.output_tokens:,} out tokens, "
            f"cost {cost}")


# -- Parallel groups: the calls of a ctx.parallel, nested under the entry that started them -------------------------

def parallel_groups(journal: list[JournalEntry]) -> tuple[dict[int, int], dict[str, int]]:
    """Which group each call's entry belongs to: journal entry id -> group's entry id, operation id -> group's.

    A group names its calls: activities by index, side effects by operation id, each marked reused or not.
    An activity's record and a side effect's moves come after the group's entry, and belong to the latest
    group of their visit that made them (a visit retried makes its unfinished calls again, in a group of its
    own); a side effect found done (a prevented duplicate) is journaled while the group is planned, before
    its entry; the ledger row belongs to the group that first prepared it.
    """
    groups = sorted((entry for entry in journal if entry.kind == JournalEntry.Kind.PARALLEL), key=lambda e: e.id)
    of_visit: dict[tuple[str, int | None], list[JournalEntry]] = {}
    for entry in journal:
        of_visit.setdefault((entry.step, entry.visit), []).append(entry)
    by_entry: dict[int, int] = {}
    by_operation: dict[str, int] = {}
    for group in groups:
        calls = (group.detail or {}).get("calls", [])
        made = {call["call_index"] for call in calls if "name" in call and not call.get("reused")}
        sent = {call["operation_id"] for call in calls if call.get("operation_id") and not call.get("reused")}
        found_done = {call.get("action") for call in calls if "action" in call and call.get("reused")}
        for operation in sent:
            by_operation.setdefault(operation, group.id)
        for entry in of_visit[(group.step, group.visit)]:
            if entry.id > group.id and (
                    (entry.kind == JournalEntry.Kind.ACTIVITY and entry.call_index in made)
                    or (entry.kind == JournalEntry.Kind.SIDE_EFFECT and (entry.detail or {}).get("operation_id") in sent)):
                by_entry[entry.id] = group.id  # a later group of the visit takes it over: it made it again
            elif entry.id < group.id and entry.kind == JournalEntry.Kind.DUPLICATE_PREVENTED and entry.name in found_done:
                by_entry.setdefault(entry.id, group.id)
    return by_entry, by_operation


def _nested(entries: list[Entry], by_entry: dict[int, int], by_operation: dict[str, int]) -> list[Entry]:
    """The entries with each parallel group's calls moved under the group's entry, in time order."""
    if not by_entry and not by_operation:
        return entries
    calls: dict[int, list[Entry]] = {}
    rest = []
    for entry in entries:
        source, key = entry.order
        group = by_entry.get(key) if source == 1 else by_operation.get(entry.operation_id) if source == 0 else None
        if group is None:
            rest.append(entry)
        else:
            calls.setdefault(group, []).append(entry)
    return [replace(entry, calls=tuple(calls[entry.order[1]])) if entry.order[0] == 1 and entry.order[1] in calls
            else entry for entry in rest]
