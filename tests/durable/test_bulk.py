"""Bulk cancel and retry (durable/bulk.py): each run through its single-run service and status rule, with an audit
row of its own linked by one bulk id; runs that changed meanwhile are skipped, never forced; a limit; a dry run
that writes nothing."""
from __future__ import annotations

import uuid

import pytest

from durable import bulk, services
from durable.engine.states import RunStatus
from durable.errors import InvalidInput
from durable.models import Run, SideEffect
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.console.screens import run_in
from tests.endpoints import written

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return make_user("olga", "durable.cancel_run", "durable.retry_run")


def side_effect(run: Run, status: str, action: str = "refund", ref: str = "") -> SideEffect:
    return SideEffect.objects.create(operation_id=uuid.uuid4().hex, run=run, step="pay", action_name=action,
                                     downstream="payments", business_key=run.business_key, request_hash="0" * 64,
                                     status=status, external_ref=ref)


def by_ids(*runs: Run) -> bulk.Selection:
    return bulk.Selection.by_ids([r.id for r in runs])


def test_a_bulk_cancel_cancels_each_run_it_applies_to_and_names_the_others(operator):
    waiting, failing = run_in(RunStatus.WAITING_RETRY, business_key="a"), run_in(RunStatus.PENDING, business_key="b")
    done = run_in(RunStatus.SUCCEEDED, business_key="c")
    missing = uuid.uuid4()
    result = bulk.perform(action="cancel", selection=bulk.Selection.by_ids([waiting.id, failing.id, done.id, missing]),
                          user=operator, source="console", reason="the promotion was withdrawn")
    assert result.counts() == {"cancelled": 2, "not_applicable": 1, "skipped": 0, "not_found": 1}
    assert {o.run_id for o in result.of("cancelled")} == {waiting.id, failing.id}
    assert [(o.run_id, o.detail) for o in result.of("not_applicable")] == [(done.id, "a SUCCEEDED run cannot be cancelled")]
    assert [o.run_id for o in result.of("not_found")] == [missing]
    assert set(Run.objects.filter(status=RunStatus.CANCELLED).values_list("id", flat=True)) == {waiting.id, failing.id}
    assert Run.objects.get(id=done.id).status == RunStatus.SUCCEEDED


def test_each_run_gets_its_own_audit_row_with_the_shared_reason_and_bulk_id(operator):
    first, second = run_in(RunStatus.FAILED, business_key="a"), run_in(RunStatus.WAITING_RETRY, business_key="b")
    result = bulk.perform(action="retry", selection=by_ids(first, second), user=operator, source="api",
                          reason="the payments outage is over")
    rows = operator_actions().order_by("run_id")
    assert sorted((r.run_id, r.action, r.source, r.reason, r.actor_username) for r in rows) == sorted(
        (run.id, "retry", "api", "the payments outage is over", "olga") for run in (first, second))
    assert {r.detail["bulk_id"] for r in rows} == {result.bulk_id}
    assert {r.status_before for r in rows} == {RunStatus.FAILED, RunStatus.WAITING_RETRY}
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.PENDING}


def test_retry_applies_where_the_single_run_retry_does(operator):
    runs = {status: run_in(status, business_key=status.value) for status in RunStatus}
    planned = bulk.plan(action="retry", selection=by_ids(*runs.values()))
    assert {o.status for o in planned.of("would_retry")} == set(services.RETRYABLE)
    assert {o.status for o in planned.of("not_applicable")} == set(RunStatus) - services.RETRYABLE


def test_a_cancel_reports_side_effects_done_and_possibly_in_flight(operator):
    run = run_in(RunStatus.NEEDS_ATTENTION, business_key="ORD-1")
    side_effect(run, "SUCCEEDED", ref="re_42")
    side_effect(run, "UNKNOWN", action="notify")
    planned = bulk.plan(action="cancel", selection=by_ids(run))
    result = bulk.perform(action="cancel", selection=by_ids(run), user=operator, source="console", reason="dup")
    for found in (planned, result):
        assert [(e.run_id, e.effect.action, e.effect.external_ref) for e in found.happened] == [(run.id, "refund", "re_42")]
        assert [(e.effect.action, e.effect.status) for e in found.may_have_happened] == [("notify", "UNKNOWN")]
    assert "re_42" in result.of("cancelled")[0].detail  # the single-run cancel's own summary
    assert result.as_json()["already_happened"][0]["external_ref"] == "re_42"


def test_a_run_that_changed_since_confirmation_is_skipped_never_forced(operator):
    moved, kept = run_in(RunStatus.FAILED, business_key="a"), run_in(RunStatus.FAILED, business_key="b")
    confirmed = {moved.id: RunStatus.FAILED.value, kept.id: RunStatus.FAILED.value}
    # Between confirmation and execution, the run moved on to another status the retry also applies to.
    Run.objects.filter(id=moved.id).update(status=RunStatus.WAITING_RETRY)
    result = bulk.perform(action="retry", selection=by_ids(moved, kept), user=operator, source="console",
                          reason="outage over", confirmed=confirmed)
    [skipped] = result.of("skipped")
    assert (skipped.run_id, skipped.status) == (moved.id, RunStatus.WAITING_RETRY)
    assert "changed from FAILED to WAITING_RETRY since you confirmed" in skipped.detail
    assert Run.objects.get(id=moved.id).status == RunStatus.WAITING_RETRY
    assert [o.run_id for o in result.of("retried")] == [kept.id]
    assert list(operator_actions().values_list("run_id", flat=True)) == [kept.id]


def test_a_run_that_ended_meanwhile_is_skipped_by_the_conditional_update(operator, monkeypatch):
    run = run_in(RunStatus.RUNNING, business_key="a")
    real_plan = bulk.plan

    def plan_then_finish(**kwargs):
        planned = real_plan(**kwargs)
        Run.objects.filter(id=run.id).update(status=RunStatus.SUCCEEDED)  # a worker finished it meanwhile
        return planned

    monkeypatch.setattr(bulk, "plan", plan_then_finish)
    result = bulk.perform(action="cancel", selection=by_ids(run), user=operator, source="api", reason="stop")
    assert [(o.outcome, o.status) for o in result.outcomes] == [("skipped", RunStatus.SUCCEEDED)]
    assert Run.objects.get(id=run.id).status == RunStatus.SUCCEEDED and not operator_actions().exists()


def test_more_runs_than_the_limit_is_refused_naming_it(operator, settings):
    settings.DURABLE_BULK_LIMIT = 2
    runs = [run_in(RunStatus.FAILED, business_key=str(i)) for i in range(3)]
    before = written()
    with pytest.raises(InvalidInput) as by_id:
        bulk.perform(action="retry", selection=by_ids(*runs), user=operator, source="api", reason="r")
    with pytest.raises(InvalidInput) as by_filter:
        bulk.plan(action="retry", selection=bulk.Selection.by_filter(Run.objects.filter(status=RunStatus.FAILED)))
    assert "3 runs were chosen" in by_id.value.errors["run_ids"][0]
    assert "more than 2 runs match" in by_filter.value.errors["filter"][0]
    assert "at most 2 runs at once (DURABLE_BULK_LIMIT)" in by_filter.value.errors["filter"][0]
    assert written() == before


def test_the_limit_defaults_to_500():
    from durable.conf import durable_settings

    assert durable_settings.DURABLE_BULK_LIMIT == 500


def test_a_dry_run_answers_what_would_happen_and_writes_nothing():
    runs = [run_in(RunStatus.PENDING, business_key="a"), run_in(RunStatus.CANCELLED, business_key="b")]
    side_effect(runs[0], "SUCCEEDED", ref="re_1")
    before = written()
    planned = bulk.plan(action="cancel", selection=bulk.Selection.by_filter(Run.objects.all()))
    assert written() == before
    answer = planned.as_json()
    assert (answer["dry_run"], answer["bulk_id"]) == (True, None)
    assert answer["counts"] == {"would_cancel": 1, "not_applicable": 1, "skipped": 0, "not_found": 0}
    assert answer["run_ids"]["would_cancel"] == [str(runs[0].id)]
    assert answer["run_ids"]["not_applicable"] == [str(runs[1].id)]
    assert [e["external_ref"] for e in answer["already_happened"]] == ["re_1"]


def test_the_single_run_actions_offer_what_the_bulk_rules_apply_to():
    from durable.console.actions import ACTIONS

    for name, spec in bulk.BULK_ACTIONS.items():
        assert ACTIONS[name].statuses == spec.statuses


@pytest.mark.django_db(transaction=True)
def test_a_bulk_cancel_of_a_parent_and_its_children_cancels_the_parent_first_and_the_children_with_it(
        operator, tmp_path):
    """Children chosen with their parent: the parent's cancel cancels them (said so), instead of a child's cancel
    waking the parent out of the status the operator confirmed, and the parent being skipped."""
    from tests.durable.claims import advance

    parent, _ = services.start_run(workflow="test-parent", input={"calls_file": str(tmp_path / "calls"), "children": 2,
                                                                  "child_waits": True}, business_key="P-1")
    parent = advance(parent)
    children = list(Run.objects.filter(parent_run=parent))
    advance(children[0])  # parked on its event; the other is still PENDING
    chosen = [*children, parent]  # newest first, as the runs list shows them
    confirmed = {run.id: Run.objects.get(id=run.id).status for run in chosen}
    assert confirmed[parent.id] == RunStatus.WAITING
    result = bulk.perform(action="cancel", selection=by_ids(*chosen), user=operator, source="console",
                          reason="the customer withdrew", confirmed=confirmed)
    assert result.counts() == {"cancelled": 3, "not_applicable": 0, "skipped": 0, "not_found": 0}
    assert [o.run_id for o in result.outcomes] == [run.id for run in chosen]  # reported in the order chosen
    with_parent = {o.run_id: o.detail for o in result.of("cancelled") if o.run_id != parent.id}
    assert with_parent == {child.id: f"Cancelled with its parent run {parent.id}, cancelled by this action."
                           for child in children}
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.CANCELLED}
