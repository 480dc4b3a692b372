"""The scale-out test: four workers and two web processes on Postgres and RabbitMQ, crashing at random.

CI runs it at a smaller size than the figures in docs/scale-out.md (`manage.py durable_scaleout --runs 2000`).
The broker is RabbitMQ on 127.0.0.1:5672 unless DURABLE_SCALEOUT_BROKER_URL names another; an
unreachable broker fails the test.
"""
import os
from pathlib import Path

import pytest
from django.db import connection

from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.tools import scaleout
from durable.tools.faults import AFTER_COMMIT, AFTER_DOWNSTREAM, AFTER_PREPARE, AFTER_STARTED

CI_RUNS = 100
BROKER = os.environ.get("DURABLE_SCALEOUT_BROKER_URL", scaleout.ScaleOutConfig.broker_url)

# (operation id, action, downstream, ledger status) of a claims run: keys, lookup, blind.
REFUND = ("op-refund", "refund", "payments", Op.SUCCEEDED)
TICKET = ("op-ticket", "ticket", "tickets", Op.SUCCEEDED)
NOTIFY = ("op-notify", "notify", "notifications", Op.SUCCEEDED)


def test_a_run_without_crashes_must_succeed_with_one_effect_per_operation():
    allowed, effects = scaleout.expected_end([REFUND, TICKET, NOTIFY], crashes={}, error=None)
    assert allowed == {RunStatus.SUCCEEDED}
    assert effects == {"op-refund": 1, "op-ticket": 1, "op-notify": 1}


@pytest.mark.parametrize("point", [AFTER_PREPARE, AFTER_STARTED, AFTER_DOWNSTREAM, AFTER_COMMIT])
def test_a_crash_where_keys_or_a_lookup_can_tell_still_ends_succeeded_with_one_effect(point):
    allowed, effects = scaleout.expected_end([REFUND, TICKET, NOTIFY],
                                             crashes={"op-refund": [point], "op-ticket": [point]}, error=None)
    assert allowed == {RunStatus.SUCCEEDED}
    assert effects["op-refund"] == effects["op-ticket"] == 1


@pytest.mark.parametrize(("point", "sent"), [(AFTER_STARTED, 0), (AFTER_DOWNSTREAM, 1)])
def test_a_crash_after_started_on_a_blind_downstream_must_end_needing_attention(point, sent):
    unknown = (*NOTIFY[:3], Op.UNKNOWN)
    allowed, effects = scaleout.expected_end([REFUND, TICKET, unknown], crashes={"op-notify": [AFTER_PREPARE, point]}, error=None)
    assert allowed == {RunStatus.NEEDS_ATTENTION}
    assert effects["op-notify"] == sent


def test_a_run_may_fail_only_when_a_downstream_refused_past_its_retry_policy():
    refused = (*REFUND[:3], Op.FAILED_RETRYABLE)
    gave_up = {"kind": "transient_http", "retryable": True, "exhausted": True}
    allowed, effects = scaleout.expected_end([refused], crashes={}, error=gave_up)
    assert allowed == {RunStatus.FAILED} and effects["op-refund"] == 0
    allowed, _ = scaleout.expected_end([refused], crashes={}, error={"kind": "bug", "retryable": False})
    assert allowed == {RunStatus.SUCCEEDED}  # a non-retryable failure is not an expected end


def test_crash_markers_name_the_operation_and_the_point(tmp_path: Path):
    (tmp_path / f"abc123.{AFTER_PREPARE}").touch()
    (tmp_path / f"abc123.{AFTER_DOWNSTREAM}").touch()
    assert sorted(scaleout.crash_markers(tmp_path)["abc123"]) == [AFTER_DOWNSTREAM, AFTER_PREPARE]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_four_workers_and_two_web_processes_never_do_anything_twice_nor_lose_a_run(worker_log_dir):
    config = scaleout.ScaleOutConfig(runs=CI_RUNS, workers=4, web=2, broker_url=BROKER, timeout=600,
                                     log_dir=worker_log_dir)
    if connection.vendor != "postgresql":
        with pytest.raises(ValueError, match="needs Postgres"):
            scaleout.validate(config)
        return
    result = scaleout.run_scaleout(config)
    print(scaleout.report(result))
    assert result.violations == []
    assert (result.duplicates, result.lost, result.unexpected, result.wrong_effects) == (0, 0, [], [])
    assert sum(result.statuses.values()) == CI_RUNS
    assert result.crashes > 0  # the faults really fired
    assert len(result.starts_by_web) == 2 and min(result.starts_by_web.values()) == CI_RUNS // 2
    assert result.resent_starts == result.resends_answered_same_run == CI_RUNS // config.resend_every


@pytest.mark.parametrize(("point", "sent"), [(AFTER_STARTED, 0), (AFTER_DOWNSTREAM, 1)])
def test_a_run_that_gave_up_settling_a_crashed_operation_must_end_needing_attention(point, sent):
    """The ticket crashed after STARTED, and every lookup that could have settled it got a 503."""
    unknown = (*TICKET[:3], Op.UNKNOWN)
    gave_up = {"kind": "unknown_side_effect", "retryable": True, "exhausted": True, "operation_id": "op-ticket"}
    allowed, effects = scaleout.expected_end([REFUND, unknown], crashes={"op-ticket": [point]}, error=gave_up)
    assert allowed == {RunStatus.NEEDS_ATTENTION}
    assert effects["op-ticket"] == sent


def test_giving_up_on_an_operation_no_crash_made_uncertain_is_not_an_expected_end():
    gave_up = {"kind": "unknown_side_effect", "retryable": True, "exhausted": True, "operation_id": "op-ticket"}
    allowed, _ = scaleout.expected_end([REFUND, (*TICKET[:3], Op.UNKNOWN)], crashes={}, error=gave_up)
    assert RunStatus.NEEDS_ATTENTION not in allowed
