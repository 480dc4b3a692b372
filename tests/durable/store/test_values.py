"""Large values stored once (durable.store.values): a value over DURABLE_LARGE_VALUE_BYTES in a state, a difference or
a recorded result is stored apart once, by its content's hash; every reader gets the whole value back, on every
backend; pruning deletes only what no row refers to, never a value a writer is about to refer to."""
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from durable import services
from durable.engine.large_values import REFERENCES, VALUE, canonical, content_hash, references
from durable.models import Checkpoint, JournalEntry, Run, StoredValue
from durable.retention import compact_finished, prune_values
from durable.store import store, values
from durable.store.checkpoints import fill_states, state_at, states_at

pytestmark = pytest.mark.django_db

DOC = "document " * 1000  # 9 KB
OTHER = "another " * 1000


@pytest.fixture(autouse=True)
def small_threshold(settings):
    settings.DURABLE_LARGE_VALUE_BYTES = 2000
    settings.DURABLE_CHECKPOINT_FULL_EVERY = 4


def claimed(run_id):
    lease, _ = store().claim(run_id, "w1", 30)
    return lease


def started():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="t")
    db_store, lease = store(), claimed(run.id)
    db_store.recorded_calls(lease, db_store.resume_point(lease).next_step)  # the claim's, handed out once
    return run, db_store, lease


def test_a_large_value_that_recurs_in_states_and_differences_is_stored_once(db):
    run, db_store, lease = started()
    written, turns = {}, []
    for n in range(1, 13):
        turns.append({"turn": n, "tool": DOC if n % 5 else OTHER, "note": "x" * 300})
        state = {"turns": list(turns), "document": DOC, "n": n}
        db_store.commit_step(lease, "step1", "step1", state, 1)
        written[n] = state
    assert sorted(StoredValue.objects.values_list("hash", flat=True)) == sorted(
        content_hash(canonical(text)) for text in (DOC, OTHER))
    rows = Checkpoint.objects.filter(run_id=run.id, seq__gte=1)
    assert rows.filter(state__isnull=True).exists() and rows.filter(state__isnull=False).exists()
    assert not any("document document" in str(row.state or row.delta) for row in rows)  # apart, not in the rows
    assert states_at(run.id, written) == written
    assert all(state_at(run.id, seq) == state for seq, state in written.items())
    shown = list(rows.order_by("seq"))
    fill_states(shown)  # the API's and the console's view
    assert [cp.state for cp in shown] == [written[n] for n in range(1, 13)]
    db_store.release(lease)
    lease = claimed(run.id)  # Postgres: the claim reads the chain along
    assert store().resume_point(lease).state == written[12]
    db_store.commit_step(lease, "step1", "step1", {**written[12], "n": 13}, 1)  # a difference from what it read
    assert state_at(run.id, 13) == {**written[12], "n": 13}


def test_large_activity_results_are_stored_once_and_read_back_on_resume(db):
    run, db_store, lease = started()
    db_store.record_activity(lease, "step1", 0, "read", {"text": DOC})
    db_store.record_activities(lease, "step1", [(1, "read", {"text": DOC}), (2, "small", 7)])
    db_store.record_activity(lease, "step1", 3, "read", DOC)
    # {"text": DOC}'s large part is DOC itself: one value for the three.
    assert list(StoredValue.objects.values_list("hash", flat=True)) == [content_hash(canonical(DOC))]
    expected = [{"text": DOC}, {"text": DOC}, 7, DOC]
    assert [call.result for call in db_store.recorded_calls(lease, "step1")] == expected
    db_store.release(lease)
    lease = claimed(run.id)  # Postgres: the claim reads the recorded calls along
    assert [call.result for call in store().recorded_calls(lease, "step1")] == expected
    entries = list(JournalEntry.objects.filter(run_id=run.id, kind="activity").order_by("call_index"))
    values.fill_results(entries)
    assert [entry.result for entry in entries] == expected


@pytest.mark.parametrize("padding", [0, 5000])
def test_a_state_that_looks_like_an_envelope_reads_back_as_itself(db, padding):
    run, db_store, lease = started()
    state = {REFERENCES: [[["x"], "0" * 64]], VALUE: {"x": 1}, "pad": "p" * padding}
    db_store.record_activity(lease, "step1", 0, "odd", state)
    assert [call.result for call in db_store.recorded_calls(lease, "step1")] == [state]
    db_store.commit_step(lease, "step1", "step1", state, 1)
    assert state_at(run.id, 1) == state


def test_a_large_value_under_the_hard_limit_is_stored_and_a_setting_of_0_keeps_it_inline(db, settings):
    settings.DURABLE_LARGE_VALUE_BYTES = 0
    run, db_store, lease = started()
    db_store.commit_step(lease, "step1", "step1", {"doc": DOC}, 1)
    assert not StoredValue.objects.exists()
    assert Checkpoint.objects.get(run_id=run.id, seq=1).state == {"doc": DOC}


def aged(*texts, days=2):
    """Store the texts apart as if written `days` ago."""
    values.write({content_hash(canonical(text)): canonical(text) for text in texts},
                 now=timezone.now() - timedelta(days=days))


def test_pruning_deletes_old_values_no_row_refers_to_and_nothing_else(db):
    run, db_store, lease = started()
    db_store.commit_step(lease, "step1", "step1", {"doc": DOC}, 1)  # refers to DOC
    StoredValue.objects.update(written_at=timezone.now() - timedelta(days=2))
    aged(OTHER)  # old, referred to by nothing
    recent = "recent " * 1000
    values.write({content_hash(canonical(recent)): canonical(recent)})  # referred to by nothing, yet
    deleted, freed = prune_values()
    assert (deleted, freed) == (1, len(canonical(OTHER)))
    assert set(StoredValue.objects.values_list("hash", flat=True)) == {content_hash(canonical(DOC)),
                                                                       content_hash(canonical(recent))}
    assert state_at(run.id, 1) == {"doc": DOC}


def test_a_value_a_writer_touches_after_the_references_were_read_is_kept_or_stored_again(db):
    """The writer's side of the race: it touches (or stores) a value before writing the row that refers to it.
    Touched before the delete, the value is no longer old; deleted first, the writer finds no row and stores it."""
    aged(DOC)
    values.write({content_hash(canonical(DOC)): canonical(DOC)})  # a writer about to refer to it
    assert prune_values() == (0, 0)
    aged(OTHER)
    assert prune_values()[0] == 1
    values.write({content_hash(canonical(OTHER)): canonical(OTHER)})  # the writer's touch came after the delete
    assert StoredValue.objects.get(hash=content_hash(canonical(OTHER))).value == OTHER


def test_compacting_a_finished_run_keeps_the_values_its_last_state_refers_to(db):
    run, db_store, lease = started()
    db_store.commit_step(lease, "step1", "step1", {"doc": OTHER, "turns": []}, 1)
    for n in range(1, 6):
        db_store.commit_step(lease, "step1", "step1", {"doc": DOC, "turns": ["t" * 500] * n}, 1)
    db_store.finish(lease, "step1", {"doc": DOC, "turns": ["t" * 500] * 6}, 1, output=None)
    Run.objects.filter(id=run.id).update(finished_at=timezone.now() - timedelta(days=2))
    StoredValue.objects.update(written_at=timezone.now() - timedelta(days=2))
    before = StoredValue.objects.count()
    report = compact_finished(timedelta(days=1))
    assert report.checkpoints == 7
    assert state_at(run.id, 7) == {"doc": DOC, "turns": ["t" * 500] * 6}
    # OTHER was only in the checkpoints deleted; DOC and the turns (3 KB of small items) are in the last one.
    kept = set(StoredValue.objects.values_list("hash", flat=True))
    assert kept == set(references(Checkpoint.objects.get(run_id=run.id).state))
    assert content_hash(canonical(DOC)) in kept and content_hash(canonical(OTHER)) not in kept
    # OTHER and the 5 turns of a full checkpoint deleted; the 6 turns stored apart as the last one was stored whole.
    assert (before, report.values) == (3, 2) and report.value_bytes > len(canonical(OTHER))
    assert f"{report.values} large value(s) no row refers to any more deleted" in str(report)


def test_durable_prune_says_how_many_values_it_deleted(db, capsys):
    aged(OTHER)
    call_command("durable_prune", "--older-than-days", "1")
    assert "1 large value(s) no row refers to any more deleted (about 0.0 MB)" in capsys.readouterr().out
    assert not StoredValue.objects.exists()
