"""A worker killed while a ctx.parallel group of four side effects was in flight, against a downstream that neither
honours idempotency keys nor can be looked up: everything the crash left in doubt is marked UNKNOWN together, the
run's error names it all, and one round of resolving lets the run go on (invariants 3 and 4)."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from durable import services
from durable.engine.ledger import OperationStatus as Op
from durable.engine.notifications import EventKind
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.notifications.models import NotificationEvent
from durable.permissions import CONTENTS_PERMISSIONS
from durable.runtime import executor
from durable.tools.faults import AFTER_DOWNSTREAM
from reconciliation.services import resolve_operation
from reconciliation.sweeper import reconcile_stale
from tests.conftest import ALL_RUN_PERMS, client_for, make_user
from tests.durable.claims import advance
from tests.durable.ledger_workflows import SimulatedCrash, crash_at, expire_lease
from tests.durable.visit_workflows import NOTICES
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db


def start_notices(tmp_path: Path) -> Run:
    run, _ = services.start_run(workflow="test-four-notices", input={"calls_file": str(tmp_path / "sent")},
                                business_key="N-1")
    return run


@pytest.fixture
def crashed(monkeypatch, tmp_path):
    """The run, its worker killed as the first answer of the group came back: all four were sent, none recorded."""
    run = start_notices(tmp_path)
    crash_at(monkeypatch, AFTER_DOWNSTREAM, "notice")
    with pytest.raises(SimulatedCrash):
        executor.advance(run.id)
    expire_lease(run)
    assert sorted(SideEffect.objects.filter(run=run).values_list("status", flat=True)) == [Op.STARTED] * NOTICES
    return run


def told_once(run) -> None:
    """Reconcilers are told of the interruption once: one operation's notice, naming the others."""
    notices = NotificationEvent.objects.filter(run_id=run.id, kind=EventKind.OPERATION_UNKNOWN)
    assert notices.count() == 1
    first = notices.get()
    others = [operation_id for operation_id in in_doubt(run) if operation_id != first.subject]
    assert len(others) == NOTICES - 1 and sorted(first.detail["unknown_with_it"].split(", ")) == others


def in_doubt(run) -> list[str]:
    return sorted(SideEffect.objects.filter(run=run, status=Op.UNKNOWN).values_list("operation_id", flat=True))


def resolve_all_once(run) -> None:
    """One round: the operator resolves each operation shown, without the run being advanced in between."""
    resolver = make_user("resolver", "durable.resolve_sideeffect", "durable.view_sideeffect")
    for operation_id in in_doubt(run):
        resolve_operation(operation_id=operation_id, user=resolver, source="test", outcome="succeeded",
                          external_ref="seen in the provider's outbox", reason="the provider's outbox shows it")


def test_the_worker_that_takes_the_run_over_marks_all_four_unknown_and_the_error_names_them(crashed):
    run = advance(crashed)
    assert run.status == RunStatus.NEEDS_ATTENTION
    unknown = in_doubt(run)
    assert len(unknown) == NOTICES and not SideEffect.objects.filter(run=run, status=Op.STARTED).exists()
    assert sorted(run.error["operation_ids"]) == unknown and run.error["kind"] == "unknown_side_effect"
    assert f"All {NOTICES} operations of the run that are UNKNOWN" in run.error["message"]
    assert all(operation_id in run.error["message"] for operation_id in unknown)
    decisions = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.RECONCILIATION)
    assert sorted(decisions.values_list("detail__operation_id", flat=True)) == unknown  # each journaled once
    viewer = make_user("viewer", "durable.view_sideeffect", *CONTENTS_PERMISSIONS, *ALL_RUN_PERMS)
    listed = client_for(viewer).get(
        "/api/operations/", {"status": "UNKNOWN", "run": str(run.id)}).json()
    assert sorted(row["operation_id"] for row in listed["results"]) == unknown
    told_once(run)


def test_one_round_of_resolving_lets_the_run_finish_without_sending_anything_again(crashed, tmp_path):
    run = advance(crashed)
    resolve_all_once(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert [result["external_ref"] for result in run.output["results"]] == ["seen in the provider's outbox"] * NOTICES
    sent = calls_in(tmp_path / "sent")
    assert len(sent) == len(set(sent)) <= NOTICES  # none sent twice (those the crash cut off were never sent)


def test_the_sweeper_marks_what_the_crash_left_in_doubt_together_even_one_operation_at_a_time(crashed):
    SideEffect.objects.filter(run=crashed).update(updated_at=timezone.now() - timedelta(hours=1))
    assert reconcile_stale(limit=1) == NOTICES  # one stale operation read, four moved
    crashed.refresh_from_db()
    assert crashed.status == RunStatus.NEEDS_ATTENTION
    assert sorted(crashed.error["operation_ids"]) == in_doubt(crashed) and len(in_doubt(crashed)) == NOTICES
    told_once(crashed)
    resolve_all_once(crashed)
    assert advance(crashed).status == RunStatus.SUCCEEDED


def test_what_a_lookup_or_a_key_can_settle_is_left_to_them(crashed):
    """Only operations nothing but an operator can settle are marked with the first: a downstream that can say
    what happened (or takes the same key again) is asked instead."""
    other = SideEffect.objects.filter(run=crashed).order_by("created_at", "operation_id").last()
    SideEffect.objects.filter(operation_id=other.operation_id).update(downstream="probe")  # honours keys
    run = advance(crashed)
    assert run.status == RunStatus.NEEDS_ATTENTION
    assert SideEffect.objects.get(operation_id=other.operation_id).status == Op.STARTED
    assert len(run.error["operation_ids"]) == NOTICES - 1
