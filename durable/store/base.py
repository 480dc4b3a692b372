"""Portable (SQLite and Postgres) run store built on the ORM's conditional UPDATEs."""
from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

import durable.store.values as values
from durable.engine.costs import PricedUsage, Spending
from durable.engine.errors import LeaseLost
from durable.engine.json_values import storable_text
from durable.engine.ledger import OperationStatus
from durable.engine.notifications import EventKind
from durable.engine.replay import RecordedCall
from durable.engine.state_delta import Chain
from durable.engine.states import CLAIMABLE, TERMINAL, RunStatus, check_transition, checked_sources
from durable.models import Checkpoint, JournalEntry, Run, RunEvent, SideEffect
from durable.signals import operator_event
from durable.store.checkpoints import chain_rows, resumed, to_store


@dataclass
class Lease:
    """What a worker holds while it advances a run."""

    run_id: UUID
    owner: str
    token: int
    seq: int  # the newest checkpoint's seq; the next one is seq + 1
    seconds: float
    resuming: bool = False  # the run ran before: claimed before, or past its first checkpoint
    waited_seconds: float | None = None  # from when the run became due again to this claim
    # When this worker last set the expiry (its monotonic clock): what it knows of the lease it has left.
    renewed_at: float = field(default_factory=time.monotonic)
    # What the claim read along with the lease (Postgres: one statement), handed out once by
    # resume_point and recorded_calls; None: those read it themselves.
    prefetched: Prefetched | None = field(default=None, repr=False, compare=False)
    # The newest checkpoint's state as this worker read or wrote it: the next checkpoint stores what changed
    # (durable.store.checkpoints.to_store); None: it stores the whole state.
    chain: Chain | None = field(default=None, repr=False, compare=False)
    # A pause was asked for the run, as a write of this worker's found it (Postgres: each step's write returns it).
    pause_asked: bool = field(default=False, repr=False, compare=False)
    # The write of this worker's last handed to its process's writer (Postgres, durable/store/batched.py): the
    # step's checkpoint joins it while it waits there unsent.
    handed: Any = field(default=None, repr=False, compare=False)
    # What the writes within a step keep left of the lease at least (durable/runtime/heartbeat.py: what a call
    # needs to leave): otherwise a call finding less left renews it with a statement of its own first.
    keep_left: float = field(default=0.0, repr=False, compare=False)

    def extended(self, now: datetime) -> datetime:
        """The expiry a fenced write sets from `now`; noted as this worker's latest renewal."""
        self.renewed_at = time.monotonic()
        return now + timedelta(seconds=self.seconds)

    def seconds_left(self) -> float:
        """How long the lease holds from now, as far as this worker knows (a lost lease holds for 0)."""
        return self.seconds - (time.monotonic() - self.renewed_at)

    def renewal(self, now: datetime) -> datetime | None:
        """The new expiry a write within a step sets, or None while more than half the lease is left (and more than
        `keep_left`: what the next call needs, so it need not renew on its own before it leaves).

        Renewing at every step would change an indexed column at every step, so no step's UPDATE
        could be heap-only. Skipping it is safe: the fencing token, not the expiry, guards every
        write, and half a lease is far longer than a step (a longer call keeps its lease alive
        through durable.runtime.heartbeat).
        """
        return self.extended(now) if self.seconds_left() < max(self.seconds / 2, self.keep_left) else None


@dataclass(frozen=True)
class ResumePoint:
    seq: int
    next_step: str
    state: dict[str, Any]
    state_schema_version: int


@dataclass
class Prefetched:
    """The newest checkpoint and the recorded activity results of the visit it starts, as the claim saw them."""

    point: ResumePoint | None
    calls: list[RecordedCall] | None
    step: str | None = None  # the step whose visit `calls` are of


# A model call's record: its call index, name, result (JSON) and usage.
ModelCall = tuple[int, str, Any, PricedUsage]


# What a claim reads from the run as it was, to tell when the run became due (resume latency).
BEFORE_CLAIM = ("status", "next_attempt_at", "lease_expires_at", "updated_at")


def _due_since(before: dict[str, Any]) -> datetime:
    """When the run became runnable: its retry time, its dead worker's lease expiry, or else
    the write that made it PENDING (a time slice's end, an approval, a resolution, an operator)."""
    retry_at: datetime | None = before["next_attempt_at"]
    lease_expired_at: datetime | None = before["lease_expires_at"]
    updated_at: datetime = before["updated_at"]
    if before["status"] == RunStatus.WAITING_RETRY and retry_at is not None:
        return retry_at
    if before["status"] == RunStatus.RUNNING and lease_expired_at is not None:
        return lease_expired_at
    return updated_at


def claim_fields(owner: str, now: datetime, lease_seconds: float) -> dict[str, Any]:
    """What a claim sets on the run, besides bumping its fencing token."""
    return {"status": RunStatus.RUNNING, "lease_owner": owner, "next_attempt_at": None, "updated_at": now,
            "lease_expires_at": now + timedelta(seconds=lease_seconds)}


def claimed_lease(run: Run, owner: str, lease_seconds: float, now: datetime, before: dict[str, Any]) -> Lease:
    """The lease a claim took, from the claimed run and its status, retry time, expiry and update time before."""
    resuming = run.fencing_token > 1 or run.checkpoint_seq > 0  # claimed before this claim, or past a checkpoint
    waited = (now - _due_since(before)).total_seconds() if resuming else None
    # The expiry was set from `now`: count the lease from then, not from this later moment.
    renewed_at = time.monotonic() - max(0.0, (timezone.now() - now).total_seconds())
    return Lease(run.id, owner, run.fencing_token, run.checkpoint_seq, lease_seconds, resuming, waited, renewed_at)


class RunStore:
    # Claiming and reading.

    def claim(self, run_id: UUID | str, owner: str, lease_seconds: float) -> tuple[Lease, Run] | None:
        """Take the run's lease if it is free (or expired) and the run is due; bump the token."""
        run = Run.objects.filter(id=run_id).first()
        if run is None:
            return None
        before = {name: getattr(run, name) for name in BEFORE_CLAIM}
        now = timezone.now()
        free = Q(lease_owner__isnull=True) | Q(lease_expires_at__lt=now)
        due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
        taken = claim_fields(owner, now, lease_seconds)
        # The token just read is part of the condition: if the UPDATE matches, nobody wrote the run in
        # between, so the row is the one read plus what this claim set (no second read), and a
        # concurrent claimer holding the same token finds nothing to update.
        updated = (
            Run.objects.filter(free & due, id=run_id, fencing_token=run.fencing_token,
                               status__in=checked_sources(RunStatus.RUNNING, CLAIMABLE))
            .update(fencing_token=F("fencing_token") + 1, **taken)
        )
        if not updated:
            return None
        for name, value in taken.items():
            setattr(run, name, value)
        run.fencing_token += 1
        return claimed_lease(run, owner, lease_seconds, now, before), run

    def resume_point(self, lease: Lease) -> ResumePoint:
        next_step, schema_version = Checkpoint.objects.filter(run_id=lease.run_id, seq=lease.seq).values_list(
            "next_step", "state_schema_version").get()
        state, lease.chain = resumed(chain_rows(lease.run_id, lease.seq))
        return ResumePoint(lease.seq, next_step, state, schema_version)

    def checkpoint_step(self, lease: Lease) -> str:
        """The step the newest checkpoint completed ("" for the run's start): where its route came from."""
        return Checkpoint.objects.filter(run_id=lease.run_id, seq=lease.seq).values_list("step", flat=True).first() or ""

    def recorded_calls(self, lease: Lease, step: str) -> list[RecordedCall]:
        """The recorded activity results of the visit the run resumes with: `step` from checkpoint `lease.seq`.

        Only that visit can have any: every later visit in the same task starts from a checkpoint this task
        wrote. Results recorded before visits existed (visit NULL) belong to the newest visit of their step,
        which is this one when the run resumes at that step (docs/workflows.md, "Visits").
        """
        rows = JournalEntry.objects.filter(Q(visit=lease.seq) | Q(visit__isnull=True), run_id=lease.run_id,
                                           step=step, kind=JournalEntry.Kind.ACTIVITY).order_by("call_index")
        calls = []
        for index, name, result in rows.values_list("call_index", "name", "result"):
            if index is None:  # the column is shared with other kinds; an activity is always written with one
                raise ValueError(f"run {lease.run_id}: an activity result of step {step} has no call position")
            calls.append(RecordedCall(index, name, result))
        return values.resolved_calls(calls)

    # Fenced writes.

    def overlapping(self) -> AbstractContextManager[None]:
        """Around a run's steps: a step's write may still be in flight while the next step runs (the
        Postgres store; docs/architecture.md, "The step write"). Here every write is confirmed before it returns."""
        return nullcontext()

    def confirm_writes(self) -> None:
        """Before a call leaves the process: raise LeaseLost if a write still in flight was refused."""

    def pause_asked(self, lease: Lease) -> bool:
        """Whether a pause was asked for the run the worker holds (durable/runtime/pausing.py): one query."""
        return lease.pause_asked or Run.objects.filter(id=lease.run_id, pause_requested_at__isnull=False).exists()

    def _fenced(self, lease: Lease, now: datetime | None, **fields: Any) -> None:
        """Update the run if the lease holds; `now` is its updated_at (None: a step's progress, which
        leaves it alone, as it does the lease's expiry while more than half is left). A status it sets is one the
        state table allows a RUNNING run (IllegalTransition otherwise: nothing is written)."""
        if "status" in fields:
            check_transition(RunStatus.RUNNING, fields["status"])
        touched = {"updated_at": now} if now is not None else {}
        updated = Run.objects.filter(
            id=lease.run_id, fencing_token=lease.token, status=RunStatus.RUNNING, checkpoint_seq=lease.seq
        ).update(**touched, **fields)
        if not updated:
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")

    def _progress(self, lease: Lease, now: datetime) -> None:
        """A write within a step (an activity's result, a ledger move) proves the lease like a step's write
        does, and changes as little: no updated_at, the expiry only when it is due (Lease.renewal)."""
        self._fenced(lease, None, lease_expires_at=lease.renewal(now) or F("lease_expires_at"))

    def _journal(self, lease: Lease, now: datetime, kind: str, step: str, **fields: Any) -> JournalEntry:
        """An entry of the visit under way: the lease's seq is the checkpoint the step started from. A result's
        large values are stored apart (durable.store.values)."""
        if fields.get("result") is not None:
            fields["result"] = values.stored(fields["result"])
        return JournalEntry.objects.create(
            run_id=lease.run_id, kind=kind, step=step, visit=lease.seq, fencing_token=lease.token, created_at=now,
            **fields
        )

    def fence(self, lease: Lease) -> None:
        """Inside a caller's transaction: prove the lease still holds (and extend it)."""
        now = timezone.now()
        self._fenced(lease, now, lease_expires_at=lease.extended(now))

    def renew(self, lease: Lease) -> None:
        """Extend the lease (durable.runtime.heartbeat); LeaseLost if it no longer holds.

        Fenced on the token and RUNNING, not on the checkpoint: the heartbeat renews from its own
        thread while this worker's steps move the checkpoint on, and only this worker writes under
        this token. It writes the expiry alone (not updated_at): one indexed column.
        """
        now = timezone.now()
        if not Run.objects.filter(id=lease.run_id, fencing_token=lease.token, status=RunStatus.RUNNING).update(
                lease_expires_at=lease.extended(now)):
            raise LeaseLost(f"run {lease.run_id}: lease token {lease.token} no longer holds")

    def renew_many(self, leases: Sequence[tuple[Lease, bool]]) -> list[bool]:
        """The heartbeat's round (durable.runtime.heartbeat): for each (lease, renew), whether the lease still holds
        (its token, RUNNING), its expiry extended when `renew`. The Postgres store does it in one statement; here
        (SQLite, a few runs per worker) one renewal per lease due and one read for the rest."""
        held = [False] * len(leases)
        watched = [index for index, (_, renew) in enumerate(leases) if not renew]
        if watched:
            holding = Q()
            for index in watched:
                holding |= Q(id=leases[index][0].run_id, fencing_token=leases[index][0].token)
            found = {(run_id, token) for run_id, token in Run.objects.filter(holding, status=RunStatus.RUNNING)
                     .values_list("id", "fencing_token")}
            for index in watched:
                held[index] = (leases[index][0].run_id, leases[index][0].token) in found
        for index, (lease, renew) in enumerate(leases):
            if renew:
                try:
                    self.renew(lease)
                    held[index] = True
                except LeaseLost:
                    pass
        return held

    def journal(self, lease: Lease, kind: str, step: str, **fields: Any) -> JournalEntry:
        return self._journal(lease, timezone.now(), kind, step, **fields)

    def needs_attention(self, lease: Lease, step: str, detail: dict[str, Any],
                        told: EventKind = EventKind.RUN_NEEDS_ATTENTION) -> None:
        """An operation is UNKNOWN (or the run's budget is spent: `told` is then RUN_OVER_BUDGET): release the run
        to wait for an operator. An UNKNOWN operation's error names every operation of the run that is UNKNOWN."""
        now = timezone.now()
        with transaction.atomic():
            detail = naming_every_unknown(lease.run_id, detail)
            self._fenced(lease, now, status=RunStatus.NEEDS_ATTENTION, error=detail, lease_owner=None,
                         lease_expires_at=None)
            self._journal(lease, now, JournalEntry.Kind.NEEDS_ATTENTION, step, detail=detail)
            operator_event.send(RunStore, kind=told, run_id=lease.run_id, occurrence=lease.token, detail=detail)

    def wait_for_approval(self, lease: Lease, step: str, detail: dict[str, Any]) -> None:
        """The step asked a human: release the run (it may wait for days; nothing holds a worker)."""
        now = timezone.now()
        with transaction.atomic():
            self._fenced(lease, now, status=RunStatus.WAITING_APPROVAL, lease_owner=None, lease_expires_at=None,
                         error=None)
            self._journal(lease, now, JournalEntry.Kind.APPROVAL, step, detail=detail)

    def record_activity(self, lease: Lease, step: str, call_index: int, name: str, result: Any) -> None:
        """Record an activity's result the moment it returns, so a crash never asks again."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            self._journal(lease, now, JournalEntry.Kind.ACTIVITY, step, call_index=call_index, name=name, result=result)

    def record_activities(self, lease: Lease, step: str, calls: list[tuple[int, str, Any]]) -> None:
        """Several activities' results (call_index, name, result) that came back together, in one fenced write."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            JournalEntry.objects.bulk_create([JournalEntry(
                run_id=lease.run_id, kind=JournalEntry.Kind.ACTIVITY, step=step, visit=lease.seq, call_index=index,
                name=name, result=values.stored(result), fencing_token=lease.token, created_at=now)
                for index, name, result in calls])

    def record_model_calls(self, lease: Lease, step: str, calls: list[ModelCall]) -> None:
        """Model calls' results (call_index, name, result, usage), each with its usage in its entry, in one fenced
        write that adds what they used to the run's totals: a result is counted when recorded, never on replay."""
        now = timezone.now()
        spent = Spending.of(priced for *_, priced in calls)
        with transaction.atomic():
            self._fenced(lease, None, lease_expires_at=lease.renewal(now) or F("lease_expires_at"),
                         input_tokens=F("input_tokens") + spent.input_tokens,
                         output_tokens=F("output_tokens") + spent.output_tokens, cost=F("cost") + spent.cost,
                         unpriced_tokens=F("unpriced_tokens") + spent.unpriced_tokens)
            JournalEntry.objects.bulk_create([JournalEntry(
                run_id=lease.run_id, kind=JournalEntry.Kind.ACTIVITY, step=step, visit=lease.seq, call_index=index,
                name=name, result=values.stored(result), detail={"usage": priced.as_json()}, fencing_token=lease.token,
                created_at=now) for index, name, result, priced in calls])

    def record_parallel(self, lease: Lease, step: str, calls: list[dict[str, Any]]) -> None:
        """ctx.parallel starts a group: its calls, their indexes, which were reused; the timeline shows one group."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            self._journal(lease, now, JournalEntry.Kind.PARALLEL, step, detail={"calls": calls})

    def record_reuse(self, lease: Lease, step: str, calls: list[dict[str, Any]]) -> None:
        """A step ran again and took these recorded results instead of calling: the timeline shows it."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            self._journal(lease, now, JournalEntry.Kind.ACTIVITY_REUSED, step, detail={"calls": calls})

    # Waits (durable.runtime.waits decides what they are). Each checks what would end the wait and parks the run
    # in one transaction that first takes the run's row (its fenced write): a sender or a child's end takes the
    # same row before waking it, so an event or an end that arrives meanwhile is seen here or wakes the run.

    def db_now(self) -> datetime:
        """The database's clock: it decides whether a timer is due, whatever a worker's clock says (invariant 17)."""
        if connection.vendor != "postgresql":
            return timezone.now()  # SQLite: a file on this machine, read with this machine's clock
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            now: datetime = cursor.fetchone()[0]
            return now

    def park(self, lease: Lease, step: str, waiting_for: dict[str, Any], wake_at: datetime | None) -> None:
        """The step waits: release the run WAITING with what it waits for and when its clock wakes it."""
        now = timezone.now()
        with transaction.atomic():
            self._park(lease, now, step, waiting_for, wake_at)

    def _park(self, lease: Lease, now: datetime, step: str, waiting_for: dict[str, Any],
              wake_at: datetime | None) -> None:
        self._fenced(lease, now, status=RunStatus.WAITING, waiting_for=waiting_for, next_attempt_at=wake_at,
                     lease_owner=None, lease_expires_at=None, error=None)
        self._journal(lease, now, JournalEntry.Kind.WAIT, step, detail=waiting_for)

    def end_wait(self, lease: Lease, step: str, call_index: int, name: str, result: Any,
                 detail: dict[str, Any]) -> None:
        """A wait ended (a timer fired, a deadline passed): its outcome recorded as the visit's call, once."""
        now = timezone.now()
        with transaction.atomic():
            self._wait_ended(lease, now, step, call_index, name, result, detail)

    def _wait_ended(self, lease: Lease, now: datetime, step: str, call_index: int, name: str, result: Any,
                    detail: dict[str, Any]) -> None:
        self._fenced(lease, None, waiting_for=None)
        self._journal(lease, now, JournalEntry.Kind.ACTIVITY, step, call_index=call_index, name=name, result=result)
        self._journal(lease, now, JournalEntry.Kind.WAIT_ENDED, step, call_index=call_index, name=name, detail=detail)

    def record_child(self, lease: Lease, step: str, call_index: int, name: str, child: dict[str, Any]) -> None:
        """The child run a call of the visit started, recorded as its result: re-executed, it finds the same one."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            self._journal(lease, now, JournalEntry.Kind.ACTIVITY, step, call_index=call_index, name=name, result=child)
            self._journal(lease, now, JournalEntry.Kind.CHILD_STARTED, step, call_index=call_index,
                          name=child["workflow"], detail=child)

    def take_event_or_park(self, lease: Lease, step: str, call_index: int, name: str, events: tuple[str, ...],
                           waiting_for: dict[str, Any], wake_at: datetime | None) -> dict[str, Any] | None:
        """The oldest unconsumed event of one of `events`, consumed by this call of the visit and recorded as its
        result (once: invariant 18); or, when the mailbox has none, the run parked until one arrives."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)  # takes the run's row first: see above
            for event in RunEvent.objects.filter(run_id=lease.run_id, name__in=events, consumed_at__isnull=True
                                                 ).order_by("id")[:1]:
                if RunEvent.objects.filter(id=event.id, consumed_at__isnull=True).update(
                        consumed_at=now, consumed_step=step, consumed_visit=lease.seq):
                    result = {"event": event_json(event)}
                    self._wait_ended(lease, now, step, call_index, name, result,
                                     {"consumed": event.id, "event": event.name, "sender": event.sender})
                    return result
            self._park(lease, now, step, waiting_for, wake_at)
            return None

    def children_or_park(self, lease: Lease, step: str, call_index: int, name: str, children: tuple[str, ...],
                         waiting_for: dict[str, Any]) -> list[dict[str, Any]] | None:
        """How each child run ended, recorded as this call's result once all have; else the run parked."""
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)  # takes the parent's row first: see above
            found = {str(run_id): (workflow, status, output, error) for run_id, workflow, status, output, error in
                     Run.objects.filter(id__in=children).values_list("id", "workflow_name", "status", "output",
                                                                     "error")}
            if all(child in found and RunStatus(found[child][1]) in TERMINAL for child in children):
                ended = [{"run_id": child, "workflow": found[child][0], "status": found[child][1],
                          "output": found[child][2], "error": found[child][3]} for child in children]
                self._wait_ended(lease, now, step, call_index, name, ended,
                                 {"children": {child: found[child][1] for child in children}})
                return ended
            self._park(lease, now, step, waiting_for, None)
            return None

    # The side-effect ledger's writes (durable.runtime.ledger decides what they are).

    def prepare_operation(self, lease: Lease, fields: dict[str, Any]) -> tuple[SideEffect, bool]:
        """The operation's ledger row, inserted PENDING unless it exists: (row, created)."""
        with transaction.atomic():
            self._progress(lease, timezone.now())
            return SideEffect.objects.get_or_create(operation_id=fields["operation_id"], defaults=fields)

    def move_operation(self, lease: Lease, row: SideEffect, sources: frozenset[str], target: str, *,
                       journal: dict[str, Any] | None, count_attempt: bool = False,
                       **fields: Any) -> datetime | None:
        """Move the row from one of `sources` to `target`, journaled when `journal` is given.

        Returns when it moved, or None if the row was no longer in `sources` (then nothing is
        journaled). `count_attempt` adds one to its attempts.
        """
        now = timezone.now()
        with transaction.atomic():
            self._progress(lease, now)
            attempts = {"attempts": F("attempts") + 1} if count_attempt else {}
            moved = SideEffect.objects.filter(operation_id=row.operation_id, status__in=sources).update(
                status=target, updated_at=now, **attempts, **fields)
            if moved and journal is not None:
                self._journal(lease, now, JournalEntry.Kind.SIDE_EFFECT, row.step, name=row.action_name, detail=journal)
        return now if moved else None

    def commit_step(self, lease: Lease, step: str, next_step: str, state: dict[str, Any], schema_version: int) -> None:
        """Checkpoint a completed step, in one transaction; renew the lease when less than half is left."""
        now = timezone.now()
        renewed = lease.renewal(now)
        with transaction.atomic():
            self._fenced(lease, None, checkpoint_seq=lease.seq + 1, current_step=next_step, attempt=0,
                         **({"lease_expires_at": renewed} if renewed else {}))
            self._checkpoint(lease, now, step, next_step, state, schema_version)
        lease.seq += 1

    def finish(self, lease: Lease, step: str, state: dict[str, Any], schema_version: int, output: Any) -> None:
        """Checkpoint the last step, record the output and release the lease, in one transaction."""
        now = timezone.now()
        with transaction.atomic():
            self._fenced(
                lease, now, checkpoint_seq=lease.seq + 1, current_step="", attempt=0, status=RunStatus.SUCCEEDED,
                output=output, error=None, finished_at=now, lease_owner=None, lease_expires_at=None,
            )  # error=None: a retry's error is the timeline's; a run that succeeded has none
            self._checkpoint(lease, now, step, "", state, schema_version)
        lease.seq += 1

    def _checkpoint(self, lease: Lease, now: datetime, step: str, next_step: str,
                    state: dict[str, Any], schema_version: int) -> None:
        stored, lease.chain = to_store(lease.chain, lease.seq + 1, state)
        Checkpoint.objects.create(
            run_id=lease.run_id, seq=lease.seq + 1, step=step, next_step=next_step, **stored.fields(),
            state_schema_version=schema_version, created_at=now,
        )

    def release(self, lease: Lease) -> None:
        """Give the run back (time slice over): any worker may pick it up next."""
        self._fenced(lease, timezone.now(), status=RunStatus.PENDING, lease_owner=None, lease_expires_at=None)

    def schedule_retry(self, lease: Lease, step: str, attempt: int, delay: float, error: dict[str, Any]) -> datetime:
        now = timezone.now()
        due = now + timedelta(seconds=delay)
        with transaction.atomic():
            self._fenced(
                lease, now, status=RunStatus.WAITING_RETRY, attempt=attempt, next_attempt_at=due, error=error,
                lease_owner=None, lease_expires_at=None,
            )
            self._journal(lease, now, JournalEntry.Kind.RETRY_SCHEDULED, step,
                          detail={"attempt": attempt, "delay_seconds": round(delay, 3), "due": due.isoformat(), "error": error})
        return due

    def fail(self, lease: Lease, step: str, attempt: int, error: dict[str, Any]) -> None:
        now = timezone.now()
        with transaction.atomic():
            self._fenced(
                lease, now, status=RunStatus.FAILED, attempt=attempt, error=error, finished_at=now,
                lease_owner=None, lease_expires_at=None,
            )
            self._journal(lease, now, JournalEntry.Kind.FAILED, step, detail={"attempt": attempt, "error": error})
            operator_event.send(RunStore, kind=EventKind.RUN_FAILED,
                                run_id=lease.run_id, occurrence=lease.token, detail=error)

    def block(self, lease: Lease, step: str, kind: str, reason: dict[str, Any]) -> None:
        """Stop the run on the replay contract: it waits for an operator, never runs on new code."""
        now = timezone.now()
        with transaction.atomic():
            self._fenced(lease, now, status=RunStatus.BLOCKED_VERSION, error=reason, lease_owner=None, lease_expires_at=None)
            self._journal(lease, now, kind, step, detail=reason)


UNKNOWN_SIDE_EFFECT = "unknown_side_effect"  # the kind of a run's error while an operation of it is UNKNOWN


def naming_every_unknown(run_id: UUID | str, error: dict[str, Any]) -> dict[str, Any]:
    """The error a run waits for an operator with, naming every operation of it that is UNKNOWN (`operation_ids`),
    not only the one met first: an operator resolves them in one round. Another kind of error is left as it is."""
    if error.get("kind") != UNKNOWN_SIDE_EFFECT:
        return error
    unknown = list(SideEffect.objects.filter(run_id=run_id, status=OperationStatus.UNKNOWN)
                   .order_by("created_at", "operation_id").values_list("operation_id", "action_name", "business_key"))
    if not unknown:
        return error
    named = {**error, "operation_ids": [operation_id for operation_id, _, _ in unknown]}
    if len(unknown) > 1:
        each = "; ".join(f"{operation_id} ({action} for {key})" for operation_id, action, key in unknown)
        named["message"] = storable_text(f"{error.get('message', '')} All {len(unknown)} operations of the run that "
                                         f"are UNKNOWN: {each}. Resolve each; the run goes on once none is left.")
    return named


def event_json(event: RunEvent) -> dict[str, Any]:
    """An event as a wait records and returns it (durable.engine.waits.Event)."""
    return {"name": event.name, "payload": event.payload, "id": event.id, "sent_at": event.received_at.isoformat(),
            "sender": event.sender}
