"""The kit a test drives runs with: start, advance in this process until nothing can go on, events, decisions,
stand-ins, crashes, and what a run recorded. Every move goes through durable's own services, executor and
sweeper, on the test's database; only the broker and the passing of time are the kit's."""
from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any
from uuid import UUID

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from durable import services
from durable.engine.states import RunStatus
from durable.events import Delivery, send_event
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime import dispatch, executor, sweeper
from durable.store.values import fill_results
from durable.testing.clock import Clock
from durable.testing.crashes import Crash, WorkerCrashed, arm, disarm_all
from durable.testing.stand_ins import Answer, StandIn, StandIns

OWNER = "durable.testing"  # the lease owner the kit's in-process worker claims runs as
MAX_ADVANCES = 10_000  # a test whose runs never stop going on fails instead of hanging

# What a worker may take now: sent, due for a retry, or held by a worker whose lease ran out.
_RUNNABLE = (Q(status=RunStatus.PENDING) | Q(status=RunStatus.WAITING_RETRY, next_attempt_at__lte=Now())
             | Q(status=RunStatus.RUNNING, lease_expires_at__lt=Now()))


def _runnable() -> list[UUID]:
    return list(Run.objects.filter(_RUNNABLE).order_by("created_at").values_list("id", flat=True))


class DurableKit:
    """One test's durable: its clock, its stand-ins, its armed crashes, and the messages a broker would carry."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.sent: list[tuple[str, list[Any]]] = []  # (task, args) every message durable sent: none left the process
        self.crashed: list[Crash] = []
        self._stand_ins = StandIns()
        self._roles_made = False
        self._delivery = dispatch.local_delivery
        dispatch.local_delivery = self._take

    def close(self) -> None:
        """Put back what the kit stood in for (the end of the test does this)."""
        dispatch.local_delivery = self._delivery
        self._stand_ins.remove_all()
        disarm_all()

    def _take(self, task: str, args: list[Any]) -> None:
        self.sent.append((task, args))

    # Runs.

    def start(self, workflow: str, input: dict[str, Any], *, business_key: str, user: Any = None,
              version: int | None = None, idempotency_key: str | None = None) -> TestRun:
        """Start a run through durable's own service (validation, the one-active-run rule, the replay contract).
        `user` is who started it (they may not approve it); `version` an older registered version."""
        run, _ = services.start_run(workflow=workflow, input=input, business_key=business_key, user=user,
                                    version=version, allow_older_version=version is not None,
                                    idempotency_key=idempotency_key, source="test")
        return TestRun(self, run.id)

    def run(self, run_id: UUID | str) -> TestRun:
        return TestRun(self, run_id)

    def advance(self) -> int:
        """Advance every run that can go on, in this process, until none can: each ends, waits (a timer, an event,
        an approval, its children, an operator) or its worker crashed at an armed fault point. When none can, a
        sweeper's beat wakes what is due (timers, deadlines, retries), expires due approvals and reconciles stale
        operations, and what it made ready goes on. Returns how many times a run was advanced; stops at the first
        crash."""
        advanced = 0
        while True:
            ready = _runnable()
            if not ready:  # a sweeper's beat, as a worker's would be: what it makes due goes on in this call
                sweeper.sweep_all()
                ready = _runnable()
            if not ready:
                return advanced
            claimed = False
            for run_id in ready:
                if advanced >= MAX_ADVANCES:
                    raise RuntimeError(f"the runs were advanced {MAX_ADVANCES} times and still go on: a loop?")
                advanced += 1
                try:
                    claimed = executor.advance(run_id, owner=OWNER).claimed or claimed
                except WorkerCrashed:
                    self._died(run_id)
                    return advanced
            if not claimed:  # none could be taken (not due yet by the database's clock): they wait
                return advanced

    def _died(self, run_id: UUID) -> None:
        """The worker that held the run is gone: its lease runs out (the clock moves past it), so the next advance
        takes the run up as another worker would after a crash."""
        Run.objects.filter(id=run_id, status=RunStatus.RUNNING).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1))

    # What the test makes happen.

    def crash_at(self, point: str, *, action: str | None = None) -> Crash:
        """The next worker to reach fault `point` (of the side effect or wait `action`, or any) dies there, once."""
        crash = arm(point, action)
        self.crashed.append(crash)
        return crash

    def stand_in(self, downstream: Any, answer: Answer | None = None) -> StandIn:
        """Answer `downstream` (a registered adapter, or its name) from the test until it ends; `answer(key,
        business_key, payload)` gives the result of an action (by default the payload)."""
        return self._stand_ins.install(downstream, answer)

    def user(self, username: str, *roles: str, **fields: Any) -> Any:
        """A user of the project's user model holding durable's role groups ("approver", "operator", ...)."""
        from django.contrib.auth.models import Group

        from durable.roles import ensure_roles

        if not self._roles_made:  # the roles migration's groups, again after the last test's flush
            ensure_roles()
            self._roles_made = True
        user = get_user_model().objects.create_user(username, **fields)
        user.groups.set(Group.objects.filter(name__in=roles))
        return get_user_model().objects.get(pk=user.pk)  # its permissions read afresh


class TestRun:
    """A run as a test sees it: read afresh from the database each time."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, kit: DurableKit, run_id: UUID | str) -> None:
        self.kit = kit
        self.id = UUID(str(run_id))

    def __repr__(self) -> str:
        return f"<TestRun {self.id} {self.status}>"

    @property
    def row(self) -> Run:
        return Run.objects.get(id=self.id)

    @property
    def status(self) -> str:
        return str(Run.objects.values_list("status", flat=True).get(id=self.id))

    @property
    def output(self) -> Any:
        return self.row.output

    @property
    def error(self) -> Any:
        return self.row.error

    @property
    def waiting_for(self) -> Any:
        return self.row.waiting_for

    def advance(self) -> TestRun:
        """Advance every run that can go on (this one, its children, its parent) until none can."""
        self.kit.advance()
        return self

    def send_event(self, name: str, payload: Any = None, *, idempotency_key: str | None = None,
                   user: Any = None) -> Delivery:
        """Send an event to this run, as the host's code (or `user`, who needs durable.send_event) would."""
        return send_event(name=name, payload=payload, run_id=self.id, idempotency_key=idempotency_key, user=user,
                          sender="" if user is not None else "test", source="test")

    # Approvals.

    def approvals(self) -> list[Any]:
        """The run's approval requests, oldest first."""
        from approvals.models import ApprovalRequest

        return list(ApprovalRequest.objects.filter(run_id=self.id).order_by("created_at", "id"))

    def pending_approval(self) -> Any:
        from approvals.models import ApprovalRequest
        from durable.engine.approvals import ApprovalStatus

        return ApprovalRequest.objects.get(run_id=self.id, status=ApprovalStatus.PENDING)

    def approve(self, user: Any, reason: str = "") -> Any:
        """Approve the run's pending request as `user`, on the snapshot it shows: the approvals service decides,
        so its rules hold (the approver role, not the run's starter, two approvers apart, the facts re-read)."""
        return self._decide(user, "approve", reason)

    def reject(self, user: Any, reason: str) -> Any:
        return self._decide(user, "reject", reason)

    def _decide(self, user: Any, verdict: str, reason: str) -> Any:
        from approvals.services import decide

        request = self.pending_approval()
        return decide(request_id=request.id, user=user, verdict=verdict, snapshot_hash=request.snapshot_hash,
                      reason=reason, source="test")

    # What it recorded.

    def ledger(self) -> list[SideEffect]:
        """Its side effects, as the ledger holds them, in the order they were prepared."""
        return list(SideEffect.objects.filter(run_id=self.id).order_by("created_at", "operation_id"))

    def journal(self, kinds: Iterable[str] = ()) -> list[JournalEntry]:
        """Its journal, oldest first (only the `kinds` given, when given)."""
        entries = JournalEntry.objects.filter(run_id=self.id).order_by("id")
        wanted = list(kinds)
        found = list(entries.filter(kind__in=wanted) if wanted else entries)
        fill_results(found)  # large values stored apart: the results as recorded
        return found

    def timeline(self) -> list[Any]:
        """Its history as the console's run page shows it (durable.console.timeline.Entry, oldest first)."""
        from durable.console.timeline import run_timeline

        return run_timeline(self.row)

    def children(self) -> list[TestRun]:
        return [TestRun(self.kit, run_id) for run_id in
                Run.objects.filter(parent_run_id=self.id).order_by("created_at").values_list("id", flat=True)]
