"""Checkpoints' states as stored: the whole state now and then, what changed otherwise (docs/state-storage.md).

Every reader of a checkpoint's whole state goes through `state_at` or `states_at` (the console, the API, version
migrations, the deploy gate, retention); the run stores write through `to_store` and resume through `resumed`.
Large values in a state or a difference are stored apart, once (durable.store.values): these put them back.
A row written before differences existed holds its whole state (base NULL): a run in flight across the upgrade
resumes from it as before, and its next checkpoint is a difference from it.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import durable.store.values as values
from durable.conf import durable_settings
from durable.engine.large_values import is_envelope
from durable.engine.state_delta import Chain, apply, copied, diff
from durable.models import Checkpoint

# A checkpoint row's state columns: (seq, whole state or None, difference or None).
StateRow = tuple[int, Any, Any]


@dataclass(frozen=True)
class Stored:
    """What a checkpoint row holds of its state, as JSON text: the whole state, or a difference and its base."""

    full: str | None
    delta: str | None
    base: int | None

    def fields(self) -> dict[str, Any]:
        """The row's columns for the ORM (which encodes JSON itself)."""
        return {"state": None if self.full is None else json.loads(self.full),
                "delta": None if self.delta is None else json.loads(self.delta), "base": self.base}


def to_store(chain: Chain | None, seq: int, state: Any) -> tuple[Stored, Chain]:
    """How checkpoint `seq` stores `state`, and what the writer knows after it. A difference when `chain` is the
    checkpoint before (the writer's own, from its resume or its last write) and a full one is not due; whole
    otherwise (a run's first checkpoint in this process, or an operator's, in between, moved the run on; or
    the state is small)."""
    if chain is not None and chain.seq == seq - 1 and chain.stores_differences():
        change = diff(chain.state, state) or {}  # {}: nothing changed
        delta = json.dumps(change)
        if not chain.wants_full(len(delta), durable_settings.DURABLE_CHECKPOINT_FULL_EVERY):
            chain.wrote_delta(seq, state, len(delta))
            return Stored(None, values.stored_text(change, delta), chain.base), chain
    full = json.dumps(state)
    return Stored(values.stored_text(state, full), None, None), Chain(seq, state, seq, len(full))


def resumed(rows: Sequence[StateRow]) -> tuple[Any, Chain]:
    """The newest state of a checkpoint's rows (its full one, then the differences after it, in seq order), and
    the chain a writer goes on from. The state returned is the caller's; the chain keeps its own copy. The rows
    are as read (large values stored apart are read back here)."""
    rows = _resolved(rows)
    first_seq, full, _ = rows[0]
    if full is None:
        raise ValueError(f"checkpoint {first_seq} is a difference: a state is read from a full checkpoint on")
    chain = Chain(first_seq, None, first_seq, len(json.dumps(full)))
    state = full
    for seq, _, delta in rows[1:]:
        state = apply(state, delta)
        chain.wrote_delta(seq, None, len(json.dumps(delta)))
    chain.state = copied(state)
    return state, chain


def _resolved(rows: Sequence[StateRow]) -> list[StateRow]:
    """The rows with the large values their states and differences refer to read back (one read for all)."""
    columns = values.resolved_all([column for _, full, delta in rows for column in (full, delta)])
    return [(seq, columns[2 * index], columns[2 * index + 1]) for index, (seq, _, _) in enumerate(rows)]


def _rows(run_id: UUID | str, first: int, last: int) -> list[StateRow]:
    return list(Checkpoint.objects.filter(run_id=run_id, seq__gte=first, seq__lte=last).order_by("seq")
                .values_list("seq", "state", "delta"))


def _base(run_id: UUID | str, seq: int) -> int:
    """The seq of the full checkpoint checkpoint `seq` builds on (itself when full). Checkpoint.DoesNotExist."""
    base = Checkpoint.objects.filter(run_id=run_id, seq=seq).values_list("base", flat=True).get()
    return seq if base is None else int(base)


def chain_rows(run_id: UUID | str, seq: int) -> list[StateRow]:
    """Checkpoint `seq`'s rows: its full one and the differences up to it. Checkpoint.DoesNotExist."""
    return _rows(run_id, _base(run_id, seq), seq)


def state_at(run_id: UUID | str, seq: int) -> Any:
    """Checkpoint `seq`'s whole state. Checkpoint.DoesNotExist when there is no such checkpoint."""
    return resumed(chain_rows(run_id, seq))[0]


def states_at(run_id: UUID | str, seqs: Iterable[int]) -> dict[int, Any]:
    """The whole states of several checkpoints of a run, reading each row once (seqs that do not exist are left
    out)."""
    wanted = sorted(set(seqs))
    if not wanted:
        return {}
    try:
        first = _base(run_id, wanted[0])
    except Checkpoint.DoesNotExist:
        first = wanted[0]
    found: dict[int, Any] = {}
    state: Any = None
    for seq, full, delta in _resolved(_rows(run_id, first, wanted[-1])):
        state = full if full is not None else apply(state, delta)
        if seq in wanted:
            found[seq] = copied(state)
    return found


def holds_whole(state: Any) -> bool:
    """Whether a checkpoint row's `state` column is its whole state as it stands: not a difference's row (NULL)
    nor one whose large values are stored apart."""
    return state is not None and not is_envelope(state)


def fill_states(checkpoints: Sequence[Checkpoint]) -> None:
    """Set each checkpoint's `state` to its whole state (a difference's row holds none): for a view or a
    serializer that shows them (a full one's too when it stores large values apart). The checkpoints are of one
    run."""
    pending = [cp for cp in checkpoints if not holds_whole(cp.state)]
    if not pending:
        return
    states = states_at(pending[0].run_id, [cp.seq for cp in pending])
    for cp in pending:
        cp.state = states.get(cp.seq)


def store_whole(run_id: UUID | str, seq: int) -> None:
    """Store checkpoint `seq`'s whole state in its row, so it needs no earlier one (a finished run's retention
    deletes them next). Inside the caller's transaction."""
    state = state_at(run_id, seq)
    Checkpoint.objects.filter(run_id=run_id, seq=seq).update(state=values.stored(state), delta=None, base=None)
