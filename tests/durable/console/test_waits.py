"""What a waiting run shows (docs/console.md, "Waiting runs"): on its page, what it waits for and the time left,
the child runs it waits on, its mailbox, its parent and children; on its timeline, its waits, the events it
received and the children it started. Every run here is parked by a real workflow, advanced in this process."""
import re
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from durable import send_event, services
from durable.console.timeline import EntryKind, run_timeline
from durable.engine.states import RunStatus
from durable.models import Run
from durable.permissions import CONTENTS_PERMISSIONS
from durable.runtime import wakes
from tests.conftest import make_user
from tests.durable.claims import advance
from tests.durable.console.parked import make_due, parked
from tests.durable.console.screens import HTMX, VIEW, client_for, detail_url

pytestmark = pytest.mark.django_db(transaction=True)  # as the waits' own tests: the park takes the run's row


def read(html: str) -> str:
    """A page as a reader reads it: each tag a space, entities decoded, spaces folded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def text(client, run: Run) -> str:
    return read(client.get(detail_url(run)).content.decode())


def between(page: str, start: str, end: str) -> str:
    return page[page.index(start):page.index(end, page.index(start))]


# -- What it waits for, and the time left ------------------------------------------------------------------------

def test_a_sleeping_runs_page_says_it_waits_for_a_timer_until_when_and_the_time_left(viewer, tmp_path):
    run = parked("test-sleep", tmp_path, seconds=3 * 3600)
    html = viewer.get(detail_url(run)).content.decode()
    assert '<span id="run-status" class="status status-waiting">WAITING</span>' in html
    panel = between(read(html), "Waiting for a timer", "The run holds no worker")
    assert "Step remind" in panel
    assert re.search(r"Fires at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC in (2|3) h", panel), panel
    assert re.search(r"Time left 2 h 59 min", panel), panel
    assert "Next attempt" not in html  # the due time is the timer's, said once


def test_an_event_wait_names_its_events_and_its_deadline_or_that_it_has_none(viewer, tmp_path):
    open_ended = parked("test-wait-event", tmp_path, seconds=0, names=["approved", "declined"])
    page = text(viewer, open_ended)
    assert "Waiting for event 'approved' or 'declined'" in page
    assert "Events approved or declined Deadline none: only the event wakes it" in page
    assert "Time left" not in page
    bounded = parked("test-wait-event", tmp_path, key="W-2", seconds=2 * 86400)
    page = text(viewer, bounded)
    assert "Waiting for event 'reply'" in page and "at the deadline the step goes on without one" in page
    assert re.search(r"Time left 1 day 23 h", page), page


def test_a_wait_past_its_due_time_says_the_sweeper_wakes_it(viewer, tmp_path):
    run = parked("test-sleep", tmp_path, seconds=3600)
    Run.objects.filter(id=run.id).update(next_attempt_at=timezone.now() - timedelta(minutes=3))
    assert re.search(r"Time left none: due 3 min( \d+ s)? ago, the sweeper wakes it at its next pass", text(viewer, run))


def test_a_parent_waiting_on_its_children_links_each_with_its_status(viewer, tmp_path):
    parent = parked("test-parent", tmp_path, children=2)
    children = list(Run.objects.filter(parent_run=parent).order_by("business_key"))
    advance(children[0])  # ends, and wakes the parent, which looks again and parks again
    parent = advance(parent)
    assert parent.status == RunStatus.WAITING
    html = viewer.get(detail_url(parent)).content.decode()
    panel = between(html, 'class="panel waiting-for"', "</section>")
    assert "Waiting for 2 child runs to end" in panel and "1 of 2 ended" in panel
    for child, status in zip(children, ["SUCCEEDED", "PENDING"], strict=True):
        assert re.search(rf'<a href="{detail_url(child)}"><code>[^<]+</code></a></td><td>test-child v1</td>'
                         rf'<td>{child.business_key}</td><td><span class="status status-{status.lower()}">{status}',
                         panel), (child.business_key, status)


def test_a_run_that_no_longer_waits_shows_no_wait(viewer, tmp_path):
    run = parked("test-sleep", tmp_path, seconds=3600)
    services.cancel_run(run_id=run.id, user=None, source="command")
    run.refresh_from_db()
    assert run.waiting_for is not None  # it may linger: the status says whether the run waits
    assert "Waiting for" not in text(viewer, run)


# -- Parent and children ------------------------------------------------------------------------------------------

def test_a_parent_lists_its_children_and_a_child_links_its_parent(viewer, tmp_path):
    parent = parked("test-parent", tmp_path, key="ORD-9", children=2)
    children = list(Run.objects.filter(parent_run=parent).order_by("created_at"))
    html = viewer.get(detail_url(parent)).content.decode()
    family = between(html, 'class="run-family"', "</section>")
    assert "Child runs" in family and all(detail_url(child) in family for child in children)
    child_page = viewer.get(detail_url(children[0])).content.decode()
    parent_line = between(child_page, '<p class="parent-run">', "</p>")
    assert f'<a href="{detail_url(parent)}">test-parent v1 · ORD-9</a>' in parent_line
    assert '<span class="status status-waiting">WAITING</span>' in parent_line


def test_a_cancelled_parents_page_shows_its_children_cancelled(viewer, tmp_path):
    parent = parked("test-parent", tmp_path, children=2, child_waits=True)
    services.cancel_run(run_id=parent.id, user=None, source="command")
    family = between(viewer.get(detail_url(parent)).content.decode(), 'class="run-family"', "</section>")
    assert family.count('<span class="status status-cancelled">CANCELLED</span>') == 2


def test_a_parent_with_many_children_lists_the_first_and_says_how_many_more(viewer, tmp_path, monkeypatch):
    from durable.console import waits

    monkeypatch.setattr(waits, "CHILDREN_SHOWN", 2)
    parent = parked("test-parent", tmp_path, children=3)
    family = between(viewer.get(detail_url(parent)).content.decode(), 'class="run-family"', "</section>")
    assert family.count("test-child v1") == 2 and "and 1 more" in family


# -- The mailbox -----------------------------------------------------------------------------------------------------

def test_the_mailbox_lists_events_in_arrival_order_consumed_or_not_and_by_which_visit(viewer, tmp_path):
    run = parked("test-console-wait-loop", tmp_path, events=3)
    send_event(run_id=run.id, name="unrelated", payload={"note": "nobody waits for me"}, sender="crm")
    send_event(run_id=run.id, name="answer", payload={"n": 1}, sender="webhook")
    run = advance(run)  # ask #1 consumes it; ask #2 waits
    send_event(run_id=run.id, name="answer", payload={"n": 2}, sender="webhook")
    run = advance(run)  # ask #2 consumes it; ask #3 waits
    assert run.status == RunStatus.WAITING
    page = text(viewer, run)
    mailbox = between(page, "Mailbox", "Timeline")
    assert "1 not consumed yet." in mailbox
    rows = re.findall(r"(unrelated|answer) #\d+ (\w+) .*? (not yet|by ask #\d)", mailbox)
    assert rows == [("unrelated", "crm", "not yet"), ("answer", "webhook", "by ask #1"),
                    ("answer", "webhook", "by ask #2")], mailbox
    assert '"nobody waits for me"' in mailbox and '"n" : 2' in mailbox


def test_an_events_payload_is_contents_hidden_without_the_contents_rule(tmp_path):
    run = parked("test-wait-event", tmp_path, seconds=0)
    send_event(run_id=run.id, name="unrelated", payload={"secret": "card 4242"}, sender="crm")
    runs_only = client_for(make_user("runs-only", VIEW))
    page = runs_only.get(detail_url(run)).content.decode()
    assert "Mailbox" in page and "unrelated" in page and "crm" in page  # that it came, and from whom
    assert "4242" not in page and "not shown (contents)" in page
    reader = client_for(make_user("reader", VIEW, *CONTENTS_PERMISSIONS))
    assert "4242" in reader.get(detail_url(run)).content.decode()


def test_a_long_mailbox_shows_the_newest_events_and_how_many_came_before(viewer, tmp_path, monkeypatch):
    from durable.console import waits

    monkeypatch.setattr(waits, "MAILBOX_SHOWN", 2)
    run = parked("test-console-wait-loop", tmp_path)  # declares no events: it takes any name
    for n in range(3):
        send_event(run_id=run.id, name=f"note-{n}", payload={}, sender="crm")
    mailbox = between(text(viewer, run), "Mailbox", "Timeline")
    assert "The 1 received before these are not listed." in mailbox
    assert "note-0" not in mailbox and mailbox.index("note-1") < mailbox.index("note-2")


def test_a_run_without_events_has_no_mailbox(viewer, tmp_path):
    assert "Mailbox" not in text(viewer, parked("test-sleep", tmp_path))


# -- The timeline ----------------------------------------------------------------------------------------------------

def summaries(run: Run, *kinds: EntryKind) -> list[tuple[str, str]]:
    return [(entry.visit or entry.step, entry.summary) for entry in run_timeline(run) if entry.kind in kinds]


def test_the_timeline_says_a_timer_was_set_until_when_and_fired(tmp_path):
    run = parked("test-sleep", tmp_path, seconds=3600)
    with timezone.override("UTC"):
        assert summaries(run, EntryKind.WAIT) == [
            ("remind", f"waits for a timer until {run.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC")]
    make_due(run)
    assert wakes.wake_due() == [run.id]
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    [(step, ended)] = summaries(run, EntryKind.WAIT_ENDED)
    assert step == "remind" and ended.startswith("timer fired (due ")
    # The wait's outcome is recorded as the visit's call too: shown once, as the wait's end.
    assert not [e for e in run_timeline(run) if e.kind == EntryKind.ACTIVITY and "durable.sleep #" in e.summary
                and "recorded" in e.summary]


def test_the_timeline_says_who_sent_an_event_whether_it_woke_the_run_and_which_visit_consumed_it(tmp_path):
    run = parked("test-console-wait-loop", tmp_path, events=2)
    first = send_event(run_id=run.id, name="answer", payload={"n": 1}, sender="webhook").event.id
    run = advance(run)
    send_event(run_id=run.id, name="stray", payload={}, sender="crm")
    second = send_event(run_id=run.id, name="answer", payload={"n": 2}, sender="webhook").event.id
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert summaries(run, EntryKind.WAIT, EntryKind.WAIT_ENDED, EntryKind.EVENT) == [
        ("ask #1", "waits for event 'answer' (no deadline)"),
        ("ask", "event 'answer' received from webhook: woke the run"),
        ("ask #1", f"event 'answer' consumed (#{first}, sent by webhook)"),
        ("ask #2", "waits for event 'answer' (no deadline)"),
        ("ask", "event 'stray' received from crm: kept in the mailbox until a wait takes it"),
        ("ask", "event 'answer' received from webhook: woke the run"),
        ("ask #2", f"event 'answer' consumed (#{second}, sent by webhook)"),
    ]
    ended = [e for e in run_timeline(run) if e.kind == EntryKind.WAIT_ENDED]
    assert ended[1].detail["returned"]["event"]["payload"] == {"n": 2}  # what the visit took, shown with it


def test_the_timeline_says_a_deadline_passed_without_the_event(tmp_path):
    run = parked("test-wait-event", tmp_path, seconds=3600)
    make_due(run)
    wakes.wake_due()
    run = advance(run)
    [(_, ended)] = summaries(run, EntryKind.WAIT_ENDED)
    assert ended.startswith("deadline passed (") and ended.endswith(
        ") without event 'reply': the step goes on without it")


def test_the_timeline_links_each_child_started_with_its_status_and_says_how_the_children_ended(viewer, tmp_path):
    parent = parked("test-parent", tmp_path, children=2, child_fails=True, catch_child_failure=True)
    children = list(Run.objects.filter(parent_run=parent).order_by("business_key"))
    for child in children:
        advance(child)
    parent = advance(parent)
    assert parent.status == RunStatus.SUCCEEDED, parent.error
    started = [e for e in run_timeline(parent) if e.kind == EntryKind.CHILD_RUN]
    assert [(e.summary, e.status, e.run_link) for e in started] == [
        (f"child run started: test-child (business key {child.business_key})", "FAILED", str(child.id))
        for child in children]
    assert summaries(parent, EntryKind.WAIT, EntryKind.WAIT_ENDED) == [
        ("delegate", "waits for 2 child runs to end"), ("delegate", "child runs ended: 2 FAILED")]
    html = viewer.get(detail_url(parent)).content.decode()
    for child in children:
        assert f'<a href="{detail_url(child)}" class="child-run-link">the child run</a>' in html


# -- Live ---------------------------------------------------------------------------------------------------------

def test_a_childs_end_changes_its_parents_page_version(viewer, tmp_path):
    parent = parked("test-parent", tmp_path, children=1, child_waits=True)
    child = advance(Run.objects.get(parent_run=parent))  # waits for its "go" event
    version = viewer.get(detail_url(parent))["ETag"]
    assert viewer.get(detail_url(parent), HTTP_IF_NONE_MATCH=version, **HTMX).status_code == 304
    Run.objects.filter(id=child.id).update(status=RunStatus.FAILED, updated_at=timezone.now())
    assert viewer.get(detail_url(parent), HTTP_IF_NONE_MATCH=version, **HTMX).status_code == 200
