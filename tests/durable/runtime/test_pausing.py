"""When the worker looks whether the run it holds was asked to pause (durable/runtime/pausing.py): at the claim,
after a step that made a call, before a step that declares side effects, and before the first call of a visit after
a boundary that did not look; a run of steps that only compute asks nothing per step, a run of steps that make calls
nothing more. On SQLite a look is a query, counted here; on Postgres each step's fenced write returns whether a
pause was asked, so no look is a query. In this process (the real-worker proof is test_pausing_worker.py)."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from durable import pauses, services
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run
from durable.runtime import executor
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db

LOOK = "pause_requested_at\" IS NOT NULL"


def looks(queries: CaptureQueriesContext) -> int:
    """The queries that asked whether a pause was asked (not the move to PAUSED, which names it too)."""
    return sum(query["sql"].startswith("SELECT") and LOOK in query["sql"] for query in queries.captured_queries)


def queried(on_sqlite: int) -> int:
    """The look queries expected: `on_sqlite` there, none on Postgres (the step writes return the request)."""
    return on_sqlite if connection.vendor == "sqlite" else 0


@pytest.fixture(autouse=True)
def rarely(settings):
    settings.DURABLE_PAUSE_LOOK_SECONDS = 3600  # no look falls due by the clock during a test


def test_a_run_of_steps_that_only_compute_looks_at_no_boundary():
    run, _ = services.start_run(workflow="test-trivial", input={}, business_key="pure")
    with CaptureQueriesContext(connection) as queries:
        outcome = executor.advance(run.id)
    assert outcome.steps == 10 and looks(queries) == 0


def test_after_each_step_that_made_a_call_the_worker_looks(tmp_path):
    calls = tmp_path / "calls"
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": str(calls)}, business_key="calls")
    with CaptureQueriesContext(connection) as queries:
        executor.advance(run.id)
    assert calls_in(calls) == ["a1", "a2", "a3", "a4"]
    assert looks(queries) == queried(2)  # after s1 and s2; s3 was the last step


def test_a_run_asked_to_pause_while_it_waited_pauses_when_claimed_before_any_step(tmp_path):
    calls = tmp_path / "calls"
    run, _ = services.start_run(workflow="test-counting", input={"calls_file": str(calls)}, business_key="held")
    Run.objects.filter(id=run.id).update(status=RunStatus.NEEDS_ATTENTION)  # held for an operator
    pauses.pause_run(run_id=run.id, user=None, source="api", reason="look first")
    Run.objects.filter(id=run.id).update(status=RunStatus.PENDING)  # the operator released it
    outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert (outcome.steps, run.status, run.lease_owner, calls_in(calls)) == (0, RunStatus.PAUSED, None, [])


def test_a_step_that_calls_after_a_step_that_made_no_call_looks_once_before_its_first_call(tmp_path):
    calls = tmp_path / "calls"
    run, _ = services.start_run(workflow="test-pause-gap", input={"calls_file": str(calls), "parallel": True},
                                business_key="no-pause")
    with CaptureQueriesContext(connection) as queries:
        outcome = executor.advance(run.id)
    assert outcome.steps == 2 and sorted(calls_in(calls)) == ["a1", "a2"]
    assert looks(queries) == queried(1)  # before a1 and a2 leave; the claim looked before `think`


def test_a_boundary_that_looked_by_the_clock_spares_the_first_call_its_look(tmp_path, settings):
    settings.DURABLE_PAUSE_LOOK_SECONDS = 0  # every boundary looks
    calls = tmp_path / "calls"
    run, _ = services.start_run(workflow="test-pause-gap", input={"calls_file": str(calls)}, business_key="clock")
    with CaptureQueriesContext(connection) as queries:
        executor.advance(run.id)
    assert calls_in(calls) == ["a1"] and looks(queries) == queried(1)  # after `think`, none before a1


@pytest.mark.parametrize("parallel", [False, True], ids=["activity", "parallel"])
def test_a_pause_asked_after_the_last_look_stops_the_next_visit_before_its_first_call_leaves(tmp_path, parallel):
    calls = tmp_path / "calls"
    run, _ = services.start_run(workflow="test-pause-gap", business_key=f"gap-{parallel}",
                                input={"calls_file": str(calls), "parallel": parallel, "pause_from_step": True})
    outcome = executor.advance(run.id)  # `think` asks the pause, as an operator would while it runs
    run.refresh_from_db()
    assert (outcome.steps, run.status, run.current_step, run.checkpoint_seq, run.lease_owner) == (
        1, RunStatus.PAUSED, "ask", 1, None)
    assert calls_in(calls) == []  # nothing sent
    assert not JournalEntry.objects.filter(run=run, visit=1).exists()  # nothing of the unwound visit written

    pauses.resume_run(run_id=run.id, user=None, source="command", reason="go on")
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(calls_in(calls)) == (["a1", "a2"] if parallel else ["a1"])  # each sent once, on resume
    assert run.output["answers"] == (["a1-result", "a2-result"] if parallel else ["a1-result"])


def test_steps_that_only_compute_stop_soon_after_a_pause_postgres_asking_no_query_for_it(settings):
    if connection.vendor == "sqlite":
        settings.DURABLE_PAUSE_LOOK_SECONDS = 0  # SQLite's worker looks by the clock: here at every boundary
    run, _ = services.start_run(workflow="test-compute-pause", input={"pause_at": 3}, business_key="compute")
    with CaptureQueriesContext(connection) as queries:
        outcome = executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED and looks(queries) == queried(outcome.steps)
    # Postgres: step 3's write found the request; it is read back with the next step's write, seen at that boundary.
    assert outcome.steps == 3 if connection.vendor == "sqlite" else 3 <= outcome.steps <= 5
    pauses.resume_run(run_id=run.id, user=None, source="command", reason="go on")
    executor.advance(run.id)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.output == {"n": 10, "pause_at": 3}
