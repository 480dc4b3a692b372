"""Forks (durable/forks.py): a new run from any checkpoint of any run, and its family's ledger that never performs a
business action twice. In-process here; with real workers: tests/durable/runtime/test_forks_worker.py."""
from __future__ import annotations

import pytest

from durable import forks, services
from durable.engine.ids import operation_id
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.errors import Conflict, InvalidInput
from durable.models import Checkpoint, JournalEntry, OperatorAction, Run, SideEffect
from durable.replay_records import RecordedRun, from_database
from durable.replayer import replay_run
from durable.runtime import executor
from reconciliation.services import resolve_operation
from tests.durable import version_workflows as vw
from tests.durable.ledger_workflows import probe

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_probe():
    probe.reset()
    yield probe
    probe.reset()


def finished_charge(business_key="B-1"):
    """A run of test-ledger-probe that charged (checkpoint 0 is before the charge, 1 after it) and succeeded."""
    run, _ = services.start_run(workflow="test-ledger-probe", input={"business_key": business_key},
                                business_key=business_key)
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and len(probe.calls) == 1
    return run


def fork(run, seq=0, **options):
    user = Run.objects.get(id=run.id).created_by  # whoever; the audit names the caller
    return forks.fork_run(run_id=run.id, seq=seq, user=options.pop("user", user), source="api",
                          reason=options.pop("reason", "prompt fixed"), **options)


def finish(run):
    executor.advance(run.id)
    run.refresh_from_db()
    return run


def test_a_fork_starts_from_the_checkpoint_names_its_origin_and_the_origin_lists_it():
    origin = finished_charge()
    forked = fork(origin)
    assert (forked.status, forked.forked_from_id, forked.forked_at_seq, forked.family_root) == (
        RunStatus.PENDING, origin.id, 0, origin.id)
    first = Checkpoint.objects.get(run=forked, seq=0)
    assert (first.next_step, first.state) == ("charge", Checkpoint.objects.get(run=origin, seq=0).state)
    assert list(origin.forks.all()) == [forked]
    assert JournalEntry.objects.get(run=origin, name="forked").detail["fork"] == str(forked.id)
    action = OperatorAction.objects.get(action="fork_run")
    assert (action.run_id, action.reason, action.detail["origin"]) == (forked.id, "prompt fixed", str(origin.id))


def test_a_fork_before_the_charge_does_not_charge_again_and_says_where_it_was_done():
    origin = finished_charge()
    forked = finish(fork(origin))
    assert forked.status == RunStatus.SUCCEEDED
    assert len(probe.calls) == 1  # the downstream was called by the origin alone
    done = JournalEntry.objects.get(run=forked, kind=JournalEntry.Kind.DUPLICATE_PREVENTED)
    assert done.detail["done_in_run"] == str(origin.id)
    assert forked.output == origin.output
    row = SideEffect.objects.get(action_name="charge")  # one row for the family, the origin's
    assert (row.run_id, row.operation_id, row.duplicates_prevented) == (
        origin.id, operation_id(str(origin.id), "charge", "B-1"), 1)


def test_a_fork_of_a_fork_keeps_the_familys_root_and_charges_nothing():
    origin = finished_charge()
    first = finish(fork(origin))
    second = finish(fork(first))
    assert (second.family_root, second.forked_from_id, second.status) == (origin.id, first.id, RunStatus.SUCCEEDED)
    assert len(probe.calls) == 1
    assert JournalEntry.objects.get(run=second, kind=JournalEntry.Kind.DUPLICATE_PREVENTED
                                    ).detail["done_in_run"] == str(origin.id)


def test_a_fork_with_another_request_under_the_same_key_is_refused_as_in_one_run():
    origin = finished_charge()
    forked = finish(fork(origin, state={"business_key": "B-1", "amount": "99.00"}))
    assert forked.status == RunStatus.FAILED  # OperationConflict: a changed request needs a new business key
    assert "a changed request needs a new business key" in forked.error["message"]
    assert len(probe.calls) == 1


def test_an_edited_state_with_a_new_business_key_is_performed_and_its_difference_audited():
    origin = finished_charge()
    forked = finish(fork(origin, state={"business_key": "B-2", "amount": "99.00"}, reason="the right order"))
    assert forked.status == RunStatus.SUCCEEDED and len(probe.calls) == 2
    assert SideEffect.objects.get(run=forked).operation_id == operation_id(str(origin.id), "charge", "B-2")
    audited = OperatorAction.objects.get(action="fork_run").detail["state_changed"]
    assert audited == {"amount": ["10.00", "99.00"], "business_key": ["B-1", "B-2"]}


def test_an_effect_unknown_in_the_family_holds_the_fork_until_an_operator_resolves_it_there():
    origin = finished_charge()
    row = SideEffect.objects.get(run=origin)
    SideEffect.objects.filter(run=origin).update(status=Op.UNKNOWN)
    forked = finish(fork(origin))
    assert forked.status == RunStatus.NEEDS_ATTENTION and len(probe.calls) == 1
    assert forked.error["operation_id"] == row.operation_id and f"UNKNOWN in run {origin.id}" in forked.error["message"]
    resolve_operation(operation_id=row.operation_id, user=None, outcome="succeeded", external_ref="checked-by-hand",
                      reason="the provider's dashboard shows it", source="api")
    assert Run.objects.get(id=forked.id).status == RunStatus.PENDING  # released with the origin's resolution
    forked = finish(forked)
    assert forked.status == RunStatus.SUCCEEDED and len(probe.calls) == 1
    assert Checkpoint.objects.filter(run=forked).latest("seq").state["charge"] == {"external_ref": "checked-by-hand"}


def test_an_effect_the_family_may_still_send_is_asked_again_later_never_sent_from_the_fork():
    origin = finished_charge()
    SideEffect.objects.filter(run=origin).update(status=Op.STARTED)  # a call in flight there, as the ledger says
    forked = finish(fork(origin))
    assert (forked.status, forked.error["kind"]) == (RunStatus.WAITING_RETRY, "in_flight_in_family")
    assert len(probe.calls) == 1


def test_a_fork_of_a_checkpoint_that_does_not_exist_writes_nothing():
    origin = finished_charge()
    with pytest.raises(forks.NoSuchCheckpoint):
        fork(origin, seq=9)
    with pytest.raises(Run.DoesNotExist):
        forks.fork_run(run_id="00000000-0000-0000-0000-000000000000", seq=0, user=None, source="api", reason="x")
    assert Run.objects.count() == 1 and not OperatorAction.objects.exists()


def test_a_fork_needs_a_reason_and_a_state_the_model_accepts_naming_the_field():
    origin = finished_charge()
    with pytest.raises(InvalidInput) as missing:
        fork(origin, reason=" ")
    assert "reason" in missing.value.errors
    with pytest.raises(InvalidInput) as refused:
        fork(origin, state={"business_key": "B-1", "charge": "not an object"})
    assert set(refused.value.errors) == {"state.charge"}
    with pytest.raises(Conflict, match="where the run ended"):
        fork(origin, seq=2)
    assert Run.objects.count() == 1


def test_a_fork_onto_a_newer_version_takes_its_migration_or_is_a_conflict_naming_the_difference():
    run, _ = services.start_run(workflow=vw.NAME, version=1, input={}, business_key="v", allow_older_version=True)
    run = finish(run)  # a -> b -> c: checkpoint 1 is before b, 2 before c
    moved = fork(run, seq=1, version=2)
    assert (moved.workflow_version, moved.current_step) == (2, "risk")
    assert Checkpoint.objects.get(run=moved, seq=0).state["risk"] == "unassessed"
    with pytest.raises(Conflict, match="maps no step for checkpoint 2's position 'c'"):
        fork(run, seq=2, version=2)
    with pytest.raises(InvalidInput) as unknown:
        fork(run, seq=1, version=7)
    assert "version" in unknown.value.errors


def test_a_fork_replays_from_its_record_with_its_familys_ledger():
    """What `durable_versions --check` replays: the fork's charge is answered by the origin's row, no mismatch."""
    origin = finished_charge()
    forked = finish(fork(origin))
    record = next(from_database(Run.objects.filter(id=forked.id)))
    assert record.family_root == str(origin.id)
    assert RecordedRun.from_json(record.as_json()).family_root == str(origin.id)
    report = replay_run(record)
    assert report.ok and report.visits == 2, report
