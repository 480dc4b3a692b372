"""Bulk cancel and retry in the console: tick runs (or take all matching the filter), confirm seeing how many and
which, and act on exactly the runs confirmed, each in the status it was seen in."""
from __future__ import annotations

import re
import uuid
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from durable.engine.states import RunStatus
from durable.models import Run, SideEffect
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.console.screens import VIEW, client_for, run_in, runs_url
from tests.endpoints import written

pytestmark = pytest.mark.django_db


@pytest.fixture
def console():
    return client_for(make_user("olivia", VIEW, "durable.cancel_run", "durable.retry_run"))


def bulk_url(action: str, **query: object) -> str:
    return f"{reverse(f'durable:bulk-{action}')}?{urlencode(query, doseq=True)}"


def confirmation_form(page: str) -> str:
    """The confirmed runs the confirmation page posts back."""
    start = page.index('name="runs" value="') + len('name="runs" value="')
    return page[start:page.index('"', start)]


def test_the_runs_list_offers_tick_boxes_and_all_matching_the_filter(console):
    run = run_in(RunStatus.FAILED, business_key="ORD-1")
    page = console.get(runs_url(), {"status": "FAILED", "workflow": ""}).content.decode()
    assert f'name="run" value="{run.id}" form="bulk-select"' in page
    assert "Cancel selected…" in page and "Retry selected…" in page
    assert f'{reverse("durable:bulk-retry")}?status=FAILED&amp;by=filter' in page


def test_a_viewer_gets_no_tick_boxes(viewer):
    run_in(RunStatus.FAILED)
    page = viewer.get(runs_url()).content.decode()
    assert 'name="run"' not in page and "bulk-select" not in page


def test_the_confirmation_shows_how_many_which_and_what_it_does_not_apply_to(console):
    failed = run_in(RunStatus.FAILED, business_key="ORD-1")
    pending = run_in(RunStatus.PENDING, business_key="ORD-2")
    done = run_in(RunStatus.SUCCEEDED, business_key="ORD-3")
    SideEffect.objects.create(operation_id="a" * 32, run=pending, step="pay", action_name="refund",
                              downstream="payments", business_key="ORD-2", request_hash="0" * 64,
                              status="SUCCEEDED", external_ref="re_77")
    before = written()
    page = console.get(bulk_url("cancel", run=[failed.id, pending.id, done.id])).content.decode()
    assert written() == before  # the confirmation writes nothing
    assert "Cancel 1 run" in page and "3 runs chosen" in page
    assert "Will be cancelled: 1" in page and "Not applicable, left as they are: 2" in page
    assert "a SUCCEEDED run cannot be cancelled" in page and "a FAILED run cannot be cancelled" in page
    assert "Already done, and not undone by cancelling: 1" in page and "re_77" in page
    assert confirmation_form(page) == f"{pending.id}:PENDING"


def test_a_long_list_is_capped_with_and_n_more(console):
    for i in range(23):
        run_in(RunStatus.FAILED, business_key=f"ORD-{i}")
    page = console.get(bulk_url("retry", by="filter", status="FAILED")).content.decode()
    assert "All 23 runs matching this filter: status FAILED." in page
    assert "Will be retried: 23" in page and "and 3 more" in page
    assert page.count('class="status status-failed"') == 20


def test_confirming_cancels_each_run_with_the_reason_and_one_bulk_id(console):
    runs = [run_in(RunStatus.WAITING_RETRY, business_key=f"ORD-{i}") for i in range(2)]
    page = console.get(bulk_url("cancel", run=[r.id for r in runs])).content.decode()
    answer = console.post(reverse("durable:bulk-cancel"), {"runs": confirmation_form(page), "confirm": "on",
                                                           "reason": "the campaign was withdrawn"})
    assert answer.status_code == 200
    assert "Cancelled 2 of 2 runs" in answer.content.decode()
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    rows = operator_actions()
    assert sorted(r.run_id for r in rows) == sorted(r.id for r in runs)
    assert {(r.action, r.source, r.reason) for r in rows} == {("cancel", "console", "the campaign was withdrawn")}
    assert len({r.detail["bulk_id"] for r in rows}) == 1


def test_a_run_that_changed_after_confirmation_is_skipped_and_reported(console):
    moved, kept = run_in(RunStatus.FAILED, business_key="a"), run_in(RunStatus.FAILED, business_key="b")
    page = console.get(bulk_url("retry", run=[moved.id, kept.id])).content.decode()
    Run.objects.filter(id=moved.id).update(status=RunStatus.WAITING_RETRY)
    answer = console.post(reverse("durable:bulk-retry"), {"runs": confirmation_form(page), "confirm": "on",
                                                          "reason": "outage over"}).content.decode()
    assert "Retried 1 of 2 runs" in answer
    assert "Skipped: changed since you confirmed, left alone: 1" in answer
    assert "changed from FAILED to WAITING_RETRY since you confirmed" in answer
    assert Run.objects.get(id=moved.id).status == RunStatus.WAITING_RETRY


@pytest.mark.parametrize("form, says", [
    ({"reason": "r"}, "tick “I confirm”"),
    ({"confirm": "on"}, "give a reason"),
    ({"confirm": "on", "reason": "   "}, "give a reason"),
])
def test_an_unconfirmed_or_unexplained_post_is_a_400_and_does_nothing(console, form, says):
    run = run_in(RunStatus.FAILED)
    before = written()
    answer = console.post(reverse("durable:bulk-retry"), {"runs": f"{run.id}:FAILED", **form})
    assert answer.status_code == 400 and says in answer.content.decode()
    assert f'value="{run.id}:FAILED"' in answer.content.decode()  # the confirmation again, to correct
    assert written() == before


def test_with_nothing_chosen_the_page_says_how_to_choose(console):
    answer = console.get(reverse("durable:bulk-cancel"))
    assert answer.status_code == 200 and "No runs chosen yet" in answer.content.decode()
    assert 'name="runs"' not in answer.content.decode()


@pytest.mark.parametrize("query, says", [
    ({"run": "not-a-run"}, "not a run id"),
    ({"run": ""}, "not a run id"),
    ({"by": "filter", "status": "DONE"}, "unknown status DONE"),
])
def test_a_bad_selection_is_a_400_saying_why(console, query, says):
    answer = console.get(bulk_url("cancel", **query))
    assert answer.status_code == 400 and says in answer.content.decode()


def test_a_post_of_runs_not_from_a_confirmation_is_a_400(console):
    before = written()
    answer = console.post(reverse("durable:bulk-cancel"), {"runs": "x:y", "confirm": "on", "reason": "r"})
    assert answer.status_code == 400 and "not a list of runs from a confirmation page" in answer.content.decode()
    assert written() == before


def test_over_the_limit_is_a_400_saying_the_limit(console, settings):
    settings.DURABLE_BULK_LIMIT = 1
    runs = [run_in(RunStatus.FAILED, business_key=str(i)) for i in range(2)]
    by_filter = console.get(bulk_url("retry", by="filter"))
    posted = console.post(reverse("durable:bulk-retry"), {"runs": " ".join(f"{r.id}:FAILED" for r in runs),
                                                         "confirm": "on", "reason": "r"})
    for answer in (by_filter, posted):
        assert answer.status_code == 400 and "at most 1 runs at once (DURABLE_BULK_LIMIT)" in answer.content.decode()
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.FAILED}


def test_the_single_run_actions_permission_is_needed():
    may_retry = client_for(make_user("rob", VIEW, "durable.retry_run"))
    run = run_in(RunStatus.PENDING)
    assert may_retry.get(bulk_url("cancel", run=run.id)).status_code == 403
    assert may_retry.post(reverse("durable:bulk-cancel"), {"runs": f"{run.id}:PENDING", "confirm": "on",
                                                          "reason": "r"}).status_code == 403
    assert Run.objects.get(id=run.id).status == RunStatus.PENDING
    assert may_retry.get(bulk_url("retry", run=uuid.uuid4())).status_code == 200


def test_the_result_links_the_audit_trail_filtered_to_the_batch_and_the_trail_shows_just_its_rows():
    auditor = client_for(make_user("ada", VIEW, "durable.cancel_run", "durable.view_operatoraction"))
    batch = [run_in(RunStatus.WAITING_RETRY, business_key=f"ORD-{i}") for i in range(2)]
    alone = run_in(RunStatus.WAITING_RETRY, business_key="ORD-9")
    auditor.post(reverse("durable:run-cancel", args=[alone.id]), {"reason": "one by one", "confirm": "on"})
    page = auditor.get(bulk_url("cancel", run=[r.id for r in batch])).content.decode()
    result = auditor.post(reverse("durable:bulk-cancel"), {"runs": confirmation_form(page), "confirm": "on",
                                                           "reason": "the campaign was withdrawn"}).content.decode()
    bulk_id = operator_actions().get(run_id=batch[0].id).detail["bulk_id"]
    link = f'{reverse("audit:trail")}?bulk={bulk_id}'
    assert f'href="{link}"' in result

    trail = auditor.get(link).content.decode()
    assert trail.count("the campaign was withdrawn") == 2 and "one by one" not in trail
    refused = auditor.get(reverse("audit:trail"), {"bulk": "not-a-bulk-id"})
    assert refused.status_code == 400 and "Bulk id: a bulk id is 32 lowercase hexadecimal" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_cancel_all_runs_waiting_for_a_timer_takes_those_runs_only(console, tmp_path):
    """The runs list's "Waiting for" filter is the bulk selection's too: never every run, as if unfiltered."""
    from tests.durable.console.parked import parked

    sleeping = parked("test-sleep", tmp_path, key="T")
    listening = parked("test-wait-event", tmp_path, key="E", seconds=0)
    rows = console.get(runs_url(), {"waiting": "timer"}).content.decode()
    link = re.search(r'<a href="([^"]+)">Cancel all runs matching this filter…</a>', rows).group(1)
    page = console.get(link.replace("&amp;", "&")).content.decode()
    assert "All 1 run matching this filter: waiting timer." in page
    assert confirmation_form(page) == f"{sleeping.id}:WAITING"
    answer = console.post(reverse("durable:bulk-cancel"), {"runs": confirmation_form(page), "confirm": "on",
                                                           "reason": "the campaign ended"})
    assert answer.status_code == 200 and "Cancelled: 1" in answer.content.decode()
    assert (Run.objects.get(id=sleeping.id).status, Run.objects.get(id=listening.id).status) == (
        RunStatus.CANCELLED, RunStatus.WAITING)
