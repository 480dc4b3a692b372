"""Step visits (docs/workflows.md, "Visits", "Parallel calls", "Side effects in loops"): a visit re-executed
reuses its own records, a later visit asks afresh; parallel calls keep their indexes whatever order they
finish in; calls from other threads are refused; a side effect asked for again in a loop is not repeated."""
import threading

import pytest

from durable import ParallelCallsFailed, RetryableError, services
from durable.console.timeline import run_timeline
from durable.engine.states import RunStatus
from durable.models import JournalEntry, Run, SideEffect
from durable.runtime import executor, parallel
from tests.durable.claims import advance, make_retry_due
from tests.durable.ledger_workflows import SimulatedCrash, crash_before_checkpoint, expire_lease, probe
from tests.durable.metered import counting
from tests.durable.visit_workflows import started_calls
from tests.durable.workflows import calls_in

pytestmark = pytest.mark.django_db(transaction=True)  # on Postgres the step's write goes in flight


@pytest.fixture(autouse=True)
def _probe():
    probe.reset()
    yield
    probe.reset()


def start(workflow: str, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input=given, business_key="V-1")
    return run


def activity_rows(run: Run) -> list[tuple[str, int, int, str]]:
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).order_by("visit", "call_index")
    return list(rows.values_list("step", "visit", "call_index", "name"))


# -- Visits ------------------------------------------------------------------------------------------------------

def test_each_visit_of_a_looping_step_asks_afresh_and_knows_which_visit_it_is(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-visit-loop", calls_file=str(calls), rounds=3))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == ["ask-1", "ask-2", "ask-3"]  # one live call per visit, none reused across visits
    assert run.output["visits"] == [[0, 1], [1, 2], [2, 3]]  # ctx.visit (a checkpoint seq), ctx.visit_number
    assert activity_rows(run) == [("act", 0, 0, "ask"), ("act", 1, 0, "ask"), ("act", 2, 0, "ask")]
    recorded = [(entry.visit, entry.summary) for entry in run_timeline(run) if entry.kind == "activity"]
    assert recorded == [("act #1", "activity ask #0 recorded"), ("act #2", "activity ask #0 recorded"),
                        ("act #3", "activity ask #0 recorded")]


def test_a_visit_run_again_after_a_crash_reuses_its_own_record_while_the_next_visit_asks_again(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    run = start("test-visit-loop", calls_file=str(calls), rounds=2)
    crash_before_checkpoint(monkeypatch, 1)  # visit #2 recorded its call, then the worker dies
    with pytest.raises(SimulatedCrash):
        advance(run)
    expire_lease(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == ["ask-1", "ask-2"]  # the re-executed visit #2 reused its record
    assert run.output["visits"] == [[0, 1], [1, 2]]
    reused = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.ACTIVITY_REUSED)
    assert (reused.step, reused.visit) == ("act", 1)


def test_a_result_recorded_before_visits_existed_is_reused_by_the_visit_the_run_resumes_with(tmp_path):
    """A run in flight across the upgrade: its recorded result has no visit (NULL) and is still reused."""
    calls = tmp_path / "calls"
    run = start("test-visit-loop", calls_file=str(calls), rounds=1)
    JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.ACTIVITY, step="act", call_index=0, name="ask",
                                result="recorded-before-visits", created_at=run.created_at)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert calls_in(calls) == [] and run.output["answers"] == ["recorded-before-visits"]


# -- Calls from threads ------------------------------------------------------------------------------------------

def test_ctx_activity_from_another_thread_is_refused_pointing_at_ctx_parallel(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-parallel", calls_file=str(calls), from_thread=True))
    assert run.status == RunStatus.SUCCEEDED, run.error
    refused = run.output["refused"]
    assert refused.startswith("WrongThread: ctx.activity was called from thread 'tool-thread', not from the thread "
                              "running step 'gather'")
    assert "ctx.parallel(ctx.call(name, fn, ...), ctx.effect(action, ...), ...)" in refused
    assert calls_in(calls) == []  # nothing was called, nothing numbered


# -- Parallel calls ----------------------------------------------------------------------------------------------

def test_parallel_calls_overlap_and_keep_their_indexes_in_the_order_given_when_the_first_finishes_last(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-parallel", calls_file=str(calls), delays=[0.4, 0.0, 0.1], effect=True))
    assert run.status == RunStatus.SUCCEEDED, run.error
    results = run.output["results"]
    assert results[:3] == ["c0-result", "c1-result", "c2-result"]
    assert results[3]["ref"] == "probe-1" and len(probe.calls) == 1
    rows = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY)
    assert sorted(rows.values_list("call_index", "name")) == [(0, "c0"), (1, "c1"), (2, "c2")]
    finished = list(rows.order_by("id").values_list("name", flat=True))
    assert finished[-1] == "c0"  # recorded as it finished (last), under the index reserved for it first
    group = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.PARALLEL)
    assert [call.get("name") or call.get("action") for call in group.detail["calls"]] == ["c0", "c1", "c2", "charge"]
    assert any(entry.summary.startswith("parallel: c0 #0, c1 #1, c2 #2, charge") for entry in run_timeline(run))


def test_a_parallel_visit_retried_after_one_call_failed_calls_only_that_call_again(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-parallel", calls_file=str(calls), delays=[0.0, 0.05, 0.0],
                        fail_first={"c1": "retryable"}, effect=True))
    assert run.status == RunStatus.WAITING_RETRY, run.error
    assert run.error["kind"] == "transient" and "c1 is briefly unavailable" in run.error["message"]
    assert sorted(started_calls(calls)) == ["c0", "c1", "c2"] and len(probe.calls) == 1
    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(started_calls(calls)) == ["c0", "c1", "c1", "c2"]  # only the unfinished call was made again
    assert len(probe.calls) == 1  # the side effect that finished is not sent again
    assert run.output["results"][:3] == ["c0-result", "c1-result", "c2-result"]
    group = JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.PARALLEL).order_by("id").last()
    assert [call["reused"] for call in group.detail["calls"]] == [True, False, True, True]


def test_parallel_calls_that_fail_for_good_fail_the_step_naming_every_error(tmp_path):
    calls = tmp_path / "calls"
    run = advance(start("test-parallel", calls_file=str(calls), fail_first={"c0": "final", "c2": "retryable"}))
    assert run.status == RunStatus.FAILED, run.error
    assert run.error["kind"] == "parallel_calls_failed" and not run.error["retryable"]
    assert run.error["message"].startswith("2 of 3 parallel calls failed: c0 #0: ")
    assert "c0 cannot answer that" in run.error["message"] and "c2 is briefly unavailable" in run.error["message"]
    assert JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY, name="c1").count() == 1


def test_parallel_runs_no_more_calls_at_once_than_the_setting_allows(settings, tmp_path, monkeypatch):
    settings.DURABLE_PARALLEL_CALLS = 2
    seen: list[int] = []
    real = parallel.ThreadPoolExecutor

    def pool(*args, **kwargs):
        seen.append(kwargs["max_workers"])
        return real(*args, **kwargs)

    monkeypatch.setattr(parallel, "ThreadPoolExecutor", pool)
    run = advance(start("test-parallel", calls_file=str(tmp_path / "calls"), delays=[0.0] * 5))
    assert run.status == RunStatus.SUCCEEDED and seen == [2]


def test_a_lost_lease_during_parallel_calls_writes_none_of_their_results(tmp_path, monkeypatch):
    """Another worker took the run while the calls were in flight: none of their results is recorded."""
    run = start("test-parallel", calls_file=str(tmp_path / "calls"), delays=[0.2, 0.2, 0.2])
    real_make = parallel._make

    def taken_meanwhile(visit, pending, results, of):
        Run.objects.filter(id=run.id).update(fencing_token=visit.lease.token + 1)  # a second worker's claim
        return real_make(visit, pending, results, of)

    monkeypatch.setattr(parallel, "_make", taken_meanwhile)
    outcome = executor.advance(run.id)
    assert outcome.claimed and outcome.steps == 0
    assert len(started_calls(tmp_path / "calls")) <= 3
    assert not JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.ACTIVITY).exists()
    assert Run.objects.get(id=run.id).checkpoint_seq == 0


# -- Side effects in loops ---------------------------------------------------------------------------------------

def test_a_loop_asking_for_the_same_refund_again_gets_the_recorded_result(tmp_path):
    with counting("side_effect_duplicate_prevented_total", action="refund") as prevented:
        run = advance(start("test-refund-loop", calls_file=str(tmp_path / "c"), amounts=["25.00", "25.00"]))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert len(probe.calls) == 1 and prevented.by == 1
    first, second = run.output["answers"]
    assert first == second and first["external_ref"] == "probe-1"
    row = SideEffect.objects.get(run=run)
    assert (row.visit, row.duplicates_prevented) == (0, 1)
    entry = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.DUPLICATE_PREVENTED)
    assert (entry.visit, entry.detail["done_in_visit"]) == (1, 0)
    assert any(e.summary == "side effect refund asked again: already done in pay #1, "
                            "the recorded result was reused" for e in run_timeline(run))


def test_the_same_refund_with_another_amount_raises_an_operation_conflict_the_step_can_catch(tmp_path):
    run = advance(start("test-refund-loop", calls_file=str(tmp_path / "c"), amounts=["25.00", "40.00"]))
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert len(probe.calls) == 1 and run.output["answers"][1] is None
    (told,) = run.output["told"]
    assert "refund for ORD-7" in told and "a changed request needs a new business key" in told


def test_an_operation_conflict_left_uncaught_fails_the_run_for_good(tmp_path):
    run = advance(start("test-refund-loop", calls_file=str(tmp_path / "c"), amounts=["25.00", "40.00"],
                        catch_conflicts=False))
    assert run.status == RunStatus.FAILED, run.error
    assert (run.error["kind"], run.error["retryable"], run.error["step"]) == ("operation_conflict", False, "pay")
    assert len(probe.calls) == 1


def test_only_the_external_calls_run_on_the_pool_threads(tmp_path, monkeypatch):
    names: list[str] = []
    real = parallel._on_pool

    def noting(fn):
        names.append(threading.current_thread().name)
        return real(fn)

    monkeypatch.setattr(parallel, "_on_pool", noting)
    run = advance(start("test-parallel", calls_file=str(tmp_path / "calls"), delays=[0.0, 0.0], effect=True))
    assert run.status == RunStatus.SUCCEEDED
    assert len(names) == 3 and all(name.startswith("durable-parallel-gather") for name in names)


def test_several_failures_are_retryable_only_if_each_is():
    retryable = ParallelCallsFailed([("a #0", RetryableError("busy", retry_after=2.0)),
                                     ("b #1", RetryableError("busy", retry_after=5.0))], of=3)
    assert retryable.retryable and retryable.retry_after == 5.0
    mixed = ParallelCallsFailed([("a #0", RetryableError("busy")), ("b #1", ValueError("bad"))], of=2)
    assert not mixed.retryable and mixed.kind == "parallel_calls_failed"


def test_a_side_effect_failing_in_a_parallel_group_is_recorded_in_the_ledger_and_only_it_is_sent_again(tmp_path):
    from durable.engine.errors import RetryableError as Busy

    def busy_once(operation_id, business_key, payload):
        if len(probe.calls) == 1:
            raise Busy("payments briefly unavailable")
        return None

    probe.on_execute = busy_once
    calls = tmp_path / "calls"
    run = advance(start("test-parallel", calls_file=str(calls), delays=[0.0, 0.0], effect=True))
    assert run.status == RunStatus.WAITING_RETRY, run.error
    assert SideEffect.objects.get(run=run).status == "FAILED_RETRYABLE"
    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert sorted(started_calls(calls)) == ["c0", "c1"]  # the activities were reused
    row = SideEffect.objects.get(run=run)
    assert len(probe.calls) == 2 and {call[0] for call in probe.calls} == {row.operation_id}  # the same key twice
    assert (row.status, row.attempts) == ("SUCCEEDED", 2)
