"""Checkpoints store what changed: every checkpoint still reads as the whole state the step returned, on every
backend, through the store's resume and through durable.store.checkpoints."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable import services
from durable.models import Checkpoint, Run
from durable.retention import compact_finished
from durable.store import store
from durable.store.checkpoints import state_at, states_at

# What a step's state may hold as the store is given it (model_dump(mode="json")): text without NUL or lone
# surrogates (check_storable refuses them before the store), finite numbers; floats below 1e15, since jsonb
# writes a larger integral float without its point (it reads back an int, whole checkpoint or not).
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**15, 10**15),
                    st.floats(-1e15, 1e15, allow_nan=False), text)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                       st.dictionaries(text, inner, max_size=4)), max_leaves=20)
states = st.dictionaries(text, values, max_size=5)


def claimed(run_id):
    lease, _ = store().claim(run_id, "w1", 30)
    return lease


def test_a_run_s_checkpoints_read_back_as_the_states_written(db):
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db_store, lease = store(), claimed(run.id)
    db_store.resume_point(lease)
    written = {0: state_at(run.id, 0)}
    messages: list[str] = []
    for turn in range(1, 12):
        messages.append(f"turn {turn} " + "x" * 300)
        state = {"messages": list(messages), "turn": turn, "flag": turn % 2 == 0}
        db_store.commit_step(lease, "step1", "step1", state, 1)
        written[turn] = json.loads(json.dumps(state))
    rows = Checkpoint.objects.filter(run_id=run.id, seq__gte=1).order_by("seq")
    # Whole while the state is small (under 1 KB), then differences.
    assert [row.state is None for row in rows][:6] == [False, False, False, False, True, True]
    assert states_at(run.id, written) == written
    assert all(state_at(run.id, seq) == state for seq, state in written.items())
    db_store.release(lease)
    resumed = store().resume_point(claimed(run.id))
    assert (resumed.seq, resumed.state) == (11, written[11])


@pytest.mark.django_db
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(st.lists(states, min_size=1, max_size=8), st.integers(1, 4), st.booleans())
def test_any_sequence_of_states_reads_back_exactly(sequence, every, padded):
    """Random appends, edits, deletions and nested values, with full checkpoints every few: each checkpoint reads
    as what was written, and a resume goes on from the newest, whole and in between. Padded, the states weigh
    over 1 KB: checkpoints store differences; else most are small, stored whole."""
    from django.test import override_settings

    if padded:
        sequence = [{**state, "padding": "p" * 1100} for state in sequence]
    with override_settings(DURABLE_CHECKPOINT_FULL_EVERY=every):
        run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
        db_store, lease = store(), claimed(run.id)
        db_store.resume_point(lease)
        for index, state in enumerate(sequence):
            db_store.commit_step(lease, "step1", "step1", state, 1)
            if index == len(sequence) // 2:  # another worker takes over: it resumes from what was stored
                db_store.release(lease)
                lease = claimed(run.id)
                assert store().resume_point(lease).state == sequence[index]
        read = states_at(run.id, range(1, len(sequence) + 1))
        assert [read[seq] for seq in range(1, len(sequence) + 1)] == sequence


def test_a_run_in_flight_across_the_upgrade_resumes_from_its_whole_state(db):
    """A checkpoint written before differences existed holds the whole state (base NULL): a resume reads it,
    and the next checkpoint is a difference from it."""
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    old = ["a" * 600, "b" * 600]
    Checkpoint.objects.filter(run_id=run.id, seq=0).update(state={"old": old})
    db_store, lease = store(), claimed(run.id)
    assert db_store.resume_point(lease).state == {"old": old}
    db_store.commit_step(lease, "step1", "step2", {"old": [*old, "c"]}, 1)
    row = Checkpoint.objects.get(run_id=run.id, seq=1)
    assert (row.state, row.delta, row.base) == (None, {"keys": {"old": {"+": ["c"]}}}, 0)


def test_compacting_a_finished_run_keeps_its_last_state_whole_and_its_journal(db):
    from datetime import timedelta

    from django.utils import timezone

    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db_store, lease = store(), claimed(run.id)
    db_store.resume_point(lease)
    for turn in range(1, 5):
        db_store.commit_step(lease, "step1", "step1", {"messages": ["m" * 100] * turn}, 1)
    db_store.record_activity(lease, "step1", 0, "ask", {"answer": 1})
    db_store.finish(lease, "step1", {"messages": ["m" * 100] * 5}, 1, output={"done": True})
    Run.objects.filter(id=run.id).update(finished_at=timezone.now() - timedelta(days=2))
    report = compact_finished(timedelta(days=1))
    assert (report.runs, report.checkpoints) == (1, 5) and report.freed_bytes > 400
    last = Checkpoint.objects.get(run_id=run.id)
    assert (last.seq, last.state, last.delta, last.base) == (5, {"messages": ["m" * 100] * 5}, None, None)
    assert run.journal.filter(kind="activity").count() == 1
    assert "journal, ledger and audit trail kept" in str(report)
