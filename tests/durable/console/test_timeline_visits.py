"""The timeline of an agent's run: each entry names its visit (`act #3`), a side effect asked again in a loop
says in which visit it was done, a route the step chose is named, a parallel group reads as one group, and
a spent step budget is said plainly."""
import re
from html import unescape as html_unescape

import pytest
from django.utils.html import strip_tags

from durable import services
from durable.console.timeline import EntryKind, run_timeline
from durable.engine.states import RunStatus
from durable.models import Run
from tests.durable import graph_workflows  # noqa: F401 (registers them)
from tests.durable.claims import advance, make_retry_due
from tests.durable.console.screens import detail_url
from tests.durable.visit_workflows import parallel_calls  # noqa: F401 (registers them)

pytestmark = pytest.mark.django_db(transaction=True)  # parallel calls: on Postgres the step's write goes in flight


def start(workflow: str, **given) -> Run:
    run, _ = services.start_run(workflow=workflow, input=given, business_key="T-1")
    return run


def test_each_entry_of_a_visit_names_it_where_the_step_was_visited_more_than_once(tmp_path):
    run = advance(start("test-visit-loop", calls_file=str(tmp_path / "calls"), rounds=3))
    entries = run_timeline(run)
    assert [(e.visit, e.summary) for e in entries if e.kind == EntryKind.ACTIVITY] == [
        ("act #1", "activity ask #0 recorded"), ("act #2", "activity ask #0 recorded"),
        ("act #3", "activity ask #0 recorded")]
    checkpoints = [(e.visit, e.summary) for e in entries if e.kind == EntryKind.CHECKPOINT]
    assert checkpoints[0] == ("", "checkpoint #0: run started → act")
    assert checkpoints[1] == ("act #1", "checkpoint #1: act done → act (route act -> act)")
    assert checkpoints[3] == ("act #3", "checkpoint #3: act done → done (route act -> done)")
    assert checkpoints[4] == ("", "checkpoint #4: done done → end")  # visited once: its name is enough


def test_the_page_shows_the_visit_in_the_step_column(viewer, tmp_path):
    run = advance(start("test-visit-loop", calls_file=str(tmp_path / "calls"), rounds=2))
    html = viewer.get(detail_url(run)).content.decode()
    rows = re.findall(r'<tr class="timeline-activity">.*?</tr>', html, re.S)
    assert [re.findall(r"<td>(act #\d)</td>", row) for row in rows] == [["act #1"], ["act #2"]]


def test_a_side_effect_asked_again_in_a_loop_says_in_which_visit_it_was_done(viewer, tmp_path):
    run = advance(start("test-refund-loop", calls_file=str(tmp_path / "c"), amounts=["25.00", "25.00"]))
    prevented = [e for e in run_timeline(run) if "asked again" in e.summary]
    assert [(e.visit, e.summary) for e in prevented] == [
        ("pay #2", "side effect refund asked again: already done in pay #1, the recorded result was reused")]
    prepared = next(e for e in run_timeline(run) if e.summary == "side effect refund prepared")
    assert prepared.visit == "pay #1"  # the ledger row names the visit that made it
    assert "already done in pay #1," in strip_tags(viewer.get(detail_url(run)).content.decode())


def test_a_parallel_group_is_one_entry_with_its_calls_nested_under_it(viewer, tmp_path):
    run = advance(start("test-parallel", calls_file=str(tmp_path / "calls"), delays=[0.2, 0.0, 0.1], effect=True))
    assert run.status == RunStatus.SUCCEEDED, run.error
    entries = run_timeline(run)
    groups = [e for e in entries if e.calls]
    assert len(groups) == 1 and groups[0].summary.startswith("parallel: c0 #0, c1 #1, c2 #2, charge")
    nested = [call.summary for call in groups[0].calls]
    assert sorted(s for s in nested if s.startswith("activity")) == [
        "activity c0 #0 recorded", "activity c1 #1 recorded", "activity c2 #2 recorded"]
    assert "side effect charge prepared" in nested and any(s.startswith("side effect charge → SUCCEEDED") for s in nested)
    top = [e.summary for e in entries]
    assert not any(s.startswith("activity c") or "charge" in s for s in top if not s.startswith("parallel"))
    html = viewer.get(detail_url(run)).content.decode()
    group = re.search(r'<tr class="timeline-parallel timeline-group">.*?</tr>', html, re.S).group(0)
    assert group.count('<li class="timeline-') == len(nested) == 5  # 3 activities, the charge prepared and done
    assert "activity c1 #1 recorded" in group and "side effect charge prepared" in group


def test_a_retried_parallel_visit_shows_the_calls_it_made_again_under_its_own_group(tmp_path):
    run = advance(start("test-parallel", calls_file=str(tmp_path / "calls"), fail_first={"c1": "retryable"}))
    make_retry_due(run)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    first, second = [e for e in run_timeline(run) if e.summary.startswith("parallel:")]
    assert sorted(call.summary for call in first.calls) == ["activity c0 #0 recorded", "activity c2 #2 recorded"]
    assert [call.summary for call in second.calls] == ["activity c1 #1 recorded"]


def test_a_run_stopped_by_its_step_budget_says_so_plainly(viewer):
    run = advance(start("test-endless"))
    assert run.status == RunStatus.FAILED
    html = viewer.get(detail_url(run)).content.decode()
    notice = html_unescape(" ".join(strip_tags(re.search(r'<p class="alert budget-spent">.*?</p>', html, re.S).group(0)).split()))
    assert notice.startswith("Stopped by its step budget: 5 step visits made, the most a run of this workflow may "
                             "make (5), without finishing. The last route was spin -> spin.")
    assert "raise the workflow's max_visits" in notice
