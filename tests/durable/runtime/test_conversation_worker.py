"""A long conversation through real workers: SIGKILLed at a visit, its run resumes from checkpoints that store
what changed, and every checkpoint, the last included, holds exactly the state the step returned."""
from __future__ import annotations

import pytest

import tests.durable.conversation_workflows  # noqa: F401  registers test-conversation in this process
from durable import services
from durable.engine.states import RunStatus
from durable.models import Checkpoint, Run
from durable.store.checkpoints import states_at
from durable.tools.processes import WorkerProcess
from tests.conftest import TEST_WORKFLOW_MODULES
from tests.durable.conversation_workflows import Chat, ChatInput, expected_states
from tests.waiting import status_of, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TURNS = 300
# A full checkpoint every 7 at most, and a time slice that ends often: the run resumes from a full checkpoint
# and the differences after it many times, on the claim's read, not only after the kill.
FAST = {"DURABLE_LEASE_SECONDS": "2", "DURABLE_SWEEP_SECONDS": "1", "DURABLE_PENDING_GRACE_SECONDS": "1",
        "DURABLE_CHECKPOINT_FULL_EVERY": "7", "DURABLE_TIME_SLICE_SECONDS": "0.5"}


@pytest.fixture
def conversation_workers(settings, own_queue):
    settings.DURABLE_WORKFLOW_MODULES = [*TEST_WORKFLOW_MODULES, "tests.durable.conversation_workflows"]


@pytest.mark.parametrize("killed_at", [137])
def test_a_run_killed_at_a_visit_ends_with_the_state_of_a_run_never_killed(
        conversation_workers, tmp_path, worker_log_dir, killed_at):
    hold = tmp_path / "hold"
    hold.touch()
    doomed = WorkerProcess(env=FAST, log_path=worker_log_dir / "conversation-doomed.log", name="conv-doomed").start()
    try:
        start = ChatInput(turns=TURNS, hold_at=killed_at, hold_file=str(hold))
        run, _ = services.start_run(workflow="test-conversation", business_key="long", input=start.model_dump())
        wait_for(lambda: Run.objects.filter(id=run.id, checkpoint_seq=killed_at).exists(), timeout=120,
                 what=f"the run to reach visit {killed_at + 1}")
        doomed.kill()
    finally:
        doomed.stop()
    hold.unlink()
    with WorkerProcess(env=FAST, beat=True, log_path=worker_log_dir / "conversation-rescuer.log",
                       name="conv-rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, timeout=120, what="the rescued run to finish")

    expected = expected_states(start)
    read = states_at(run.id, range(1, TURNS + 1))
    # Every checkpoint, the last one included, read as the step's state model (a set has no order in JSON).
    assert [Chat.model_validate(read[seq]) for seq in range(1, TURNS + 1)] == expected
    rows = Checkpoint.objects.filter(run_id=run.id)
    assert rows.count() == TURNS + 1  # each visit checkpointed once, the killed one included
    assert rows.filter(state__isnull=True).count() > TURNS / 2  # most store only what changed
    assert Chat.model_validate(Run.objects.get(id=run.id).output) == expected[-1]


def test_a_large_value_in_every_turn_and_result_is_stored_once_and_survives_a_kill(
        conversation_workers, tmp_path, worker_log_dir):
    """An activity returns a 200 KB document at each of 20 visits and the state keeps it in every turn: one stored
    value holds it, the checkpoints and the journal refer to it, and a run killed at visit 10 ends as one never
    killed."""
    from durable.models import JournalEntry, StoredValue
    from durable.retention import json_weight
    from durable.store.values import fill_results
    from tests.durable.conversation_workflows import DOCUMENT_BYTES, ReadingInput, expected_reading, read_document

    hold = tmp_path / "hold"
    hold.touch()
    doomed = WorkerProcess(env=FAST, log_path=worker_log_dir / "large-doomed.log", name="large-doomed").start()
    try:
        start = ReadingInput(turns=20, hold_at=10, hold_file=str(hold))
        run, _ = services.start_run(workflow="test-large-value", business_key="large", input=start.model_dump())
        wait_for(lambda: Run.objects.filter(id=run.id, checkpoint_seq=10).exists(), timeout=120,
                 what="the run to reach visit 11")
        doomed.kill()
    finally:
        doomed.stop()
    hold.unlink()
    with WorkerProcess(env=FAST, beat=True, log_path=worker_log_dir / "large-rescuer.log", name="large-rescuer"):
        wait_for(lambda: status_of(run.id) == RunStatus.SUCCEEDED, timeout=120, what="the rescued run to finish")

    expected = expected_reading(start).model_dump(mode="json")
    assert states_at(run.id, [20])[20] == expected
    document = read_document("report")
    stored = list(StoredValue.objects.values_list("size", flat=True))
    assert len(stored) == 1 and DOCUMENT_BYTES < stored[0] < DOCUMENT_BYTES + 100  # the document, once
    # The rows that refer to it hold a few KB in all, where inline they would hold 20 results and 20+ turns.
    rows = json_weight(Checkpoint.objects.filter(run_id=run.id), "state", "delta")
    rows += json_weight(JournalEntry.objects.filter(run_id=run.id), "result", "detail")
    assert rows < DOCUMENT_BYTES / 4
    results = list(JournalEntry.objects.filter(run_id=run.id, kind=JournalEntry.Kind.ACTIVITY))
    fill_results(results)
    assert len(results) >= 20 and all(entry.result == document for entry in results)
