"""Random sequences of operator and worker actions against one run, through the real store, transitions module and
services on the test database: every status move that happens is one the state table allows, and every move it
forbids raises IllegalTransition and changes nothing."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db.models import Q
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable import pauses, services
from durable.engine.errors import LeaseLost
from durable.engine.states import IllegalTransition, RunStatus, can_transition
from durable.errors import Conflict
from durable.models import Checkpoint, JournalEntry, Run
from durable.runtime import transitions, wakes
from durable.store import Lease, RunStore
from tests.durable.runtime.test_transitions import new_run

pytestmark = pytest.mark.django_db

STEP = "first"


@dataclass
class World:
    """One run and the worker's lease on it, if it took one."""

    run: Run
    store: RunStore = field(default_factory=RunStore)
    lease: Lease | None = None

    def status(self) -> RunStatus:
        return RunStatus(Run.objects.values_list("status", flat=True).get(id=self.run.id))

    def row(self) -> tuple:
        return Run.objects.values_list("status", "fencing_token", "checkpoint_seq", "updated_at", "error").get(
            id=self.run.id)


# The worker's moves, under its lease: LeaseLost when it holds none that still holds.
WORKER: dict[str, Callable[[World, Lease], Any]] = {
    "release": lambda w, lease: w.store.release(lease),
    "park": lambda w, lease: w.store.park(lease, STEP, {"kind": "timer"}, None),
    "ask_approval": lambda w, lease: w.store.wait_for_approval(lease, STEP, {"kind": "refund"}),
    "unknown": lambda w, lease: w.store.needs_attention(lease, STEP, {"kind": "unknown_side_effect", "message": "?"}),
    "block_version": lambda w, lease: w.store.block(lease, STEP, JournalEntry.Kind.REPLAY_VIOLATION, {"message": "v"}),
    "retry_later": lambda w, lease: w.store.schedule_retry(lease, STEP, 1, 0.0, {"message": "flaky"}),
    "step": lambda w, lease: w.store.commit_step(lease, STEP, STEP, {"n": lease.seq + 1}, 1),
    "succeed": lambda w, lease: w.store.finish(lease, STEP, {"n": 9}, 1, {"done": True}),
    "fail": lambda w, lease: w.store.fail(lease, STEP, 1, {"message": "for good"}),
    "pause_at_boundary": lambda w, lease: transitions.paused_by_worker(w.run.id, token=lease.token),
}


def claim(w: World) -> None:
    claimed = w.store.claim(w.run.id, "worker-1", 30)
    if claimed is not None:
        w.lease = claimed[0]


def migrate(w: World) -> None:
    seq = Run.objects.values_list("checkpoint_seq", flat=True).get(id=w.run.id)
    transitions.migrate(w.run.id, seq=seq, from_version=1, to_version=2, next_step=STEP, state={"n": 0},
                        schema_version=1, now=timezone.now())


def sweeper_holds(w: World) -> None:
    token = Run.objects.values_list("fencing_token", flat=True).get(id=w.run.id)
    transitions.needs_attention(w.run.id, {"kind": "unknown_side_effect", "message": "?"}, token=token,
                                sources={RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING_RETRY},
                                where=~Q(lease_expires_at__gte=timezone.now()))


# What operators, the sweeper and other runs do, each as the code that does it; a Conflict is the API's 409.
OPERATOR: dict[str, Callable[[World], Any]] = {
    "claim": claim,
    "wake": lambda w: wakes.wake(w.run.id),
    "approve": lambda w: transitions.move(w.run.id, RunStatus.PENDING, sources={RunStatus.WAITING_APPROVAL}),
    "resolve": lambda w: transitions.move(w.run.id, RunStatus.PENDING, sources={RunStatus.NEEDS_ATTENTION}, error=None),
    "cancel": lambda w: services.cancel_run(run_id=w.run.id, user=None, source="test"),
    "retry": lambda w: services.retry_run(run_id=w.run.id, user=None, source="test"),
    "resume": lambda w: services.resume_run(run_id=w.run.id, user=None, source="test"),
    "migrate": migrate,
    "sweeper_holds": sweeper_holds,
    "pause": lambda w: pauses.pause_run(run_id=w.run.id, user=None, source="test"),
    "resume_paused": lambda w: pauses.resume_run(run_id=w.run.id, user=None, source="test"),
}

actions = st.one_of(
    st.sampled_from(sorted(WORKER)), st.sampled_from(sorted(OPERATOR)),
    st.tuples(st.just("force"), st.sampled_from(list(RunStatus))),  # any move at all, asked of the door
)


def act(w: World, action: str | tuple[str, RunStatus]) -> None:
    """Do the action, and check what it did to the run's status against the table."""
    before = w.row()
    checkpoints = Checkpoint.objects.filter(run_id=w.run.id).count()
    if isinstance(action, tuple):
        target = action[1]
        if not can_transition(before[0], target):
            with pytest.raises(IllegalTransition):
                transitions.move(w.run.id, target, sources={before[0]})
            assert w.row() == before  # refused, and nothing changed
            return
        assert transitions.move(w.run.id, target, sources={before[0]})
    elif action in WORKER:
        try:
            WORKER[action](w, w.lease or Lease(w.run.id, "nobody", -1, 0, 30))
        except LeaseLost:
            assert w.row() == before  # a worker without the lease writes nothing
            return
    else:
        try:
            OPERATOR[action](w)
        except Conflict:
            assert w.row()[0] == before[0]  # refused as the API refuses it
            return
    after = w.status()
    assert after == before[0] or can_transition(before[0], after), f"{action}: {before[0]} -> {after}"
    assert Checkpoint.objects.filter(run_id=w.run.id).count() in (checkpoints, checkpoints + 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(actions, min_size=1, max_size=14))
def test_every_move_of_a_run_is_one_the_table_allows_whatever_is_done_to_it(sequence):
    world = World(new_run())
    seen = [world.status()]
    for action in sequence:
        act(world, action)
        if world.status() != seen[-1]:
            seen.append(world.status())
    assert all(can_transition(a, b) for a, b in zip(seen, seen[1:], strict=False))


def test_the_actions_reach_every_status():
    """The sequences above can go everywhere the table does: a run walked through every status."""
    world = World(new_run())
    walk = ["claim", "pause", "pause_at_boundary", "resume_paused", "claim", "park", "wake", "claim", "ask_approval", "approve", "claim", "retry_later", "claim", "unknown",
            "resolve", "claim", "block_version", "migrate", "claim", "fail", "retry", "sweeper_holds", "cancel"]
    seen = []
    for action in walk:
        act(world, action)
        seen.append(world.status())
    assert set(seen) == set(RunStatus) - {RunStatus.SUCCEEDED}
    other = World(new_run())
    for action in ("claim", "step", "succeed"):
        act(other, action)
    assert other.status() == RunStatus.SUCCEEDED
