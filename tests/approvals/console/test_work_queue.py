"""The inbox as a work queue (tabs by who may act), the decision panel offering only what the user may still do,
the links between a refused request and the one that replaced it, and the live approval screens."""
import html as markup
import re
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors import TABS, tab_counts
from tests.approvals.flow import decide, waiting_claim
from tests.conftest import make_user
from tests.durable.console.screens import HTMX, client_for

pytestmark = pytest.mark.django_db

VIEW, DECIDE = "approvals.view_approvalrequest", "approvals.decide_approvalrequest"


def detail_url(request):
    return reverse("approvals:detail", args=[request.id])


def shown_version(response) -> str:
    return markup.unescape(re.search(r'data-version="([^"]*)"', response.content.decode()).group(1))


def needing_two(request: ApprovalRequest) -> ApprovalRequest:
    ApprovalRequest.objects.filter(id=request.id).update(approvers_required=2)
    request.refresh_from_db()
    return request


@pytest.fixture
def people(db):
    return {"sam": make_user("sam", VIEW, DECIDE),  # starts a run, and approves others'
            "ann": make_user("ann", VIEW, DECIDE), "bob": make_user("bob", VIEW, DECIDE),
            "vic": make_user("vic", VIEW)}  # sees the inbox, decides nothing


@pytest.fixture
def queue(demo, people):
    """Four pending requests and a decided one: the work queue every user sees differently."""
    for order_id in ("ORD-1004", "ORD-1005"):
        demo.state.upsert_order({"order_id": order_id, "customer": "Edsger Dijkstra", "amount": "20.00",
                                 "currency": "EUR"})
    _, started_by_sam = waiting_claim("ORD-1001", starter=people["sam"])
    _, approved_by_ann = waiting_claim("ORD-1002")
    decide(needing_two(approved_by_ann), people["ann"])
    _, expiring = waiting_claim("ORD-1003")
    ApprovalRequest.objects.filter(id=expiring.id).update(expires_at=timezone.now() + timedelta(minutes=30))
    _, nobodys = waiting_claim("ORD-1004")
    _, decided = waiting_claim("ORD-1005")
    decide(decided, people["bob"])
    return {"started_by_sam": started_by_sam, "approved_by_ann": approved_by_ann, "expiring": expiring,
            "nobodys": nobodys, "decided": decided}


# Who sees which request in which tab (the decided request is in none).
MEMBERSHIP = {
    "sam": {"needs_me": {"approved_by_ann", "expiring", "nobodys"}, "approved_by_me": set(),
            "started_by_me": {"started_by_sam"}},
    "ann": {"needs_me": {"started_by_sam", "expiring", "nobodys"}, "approved_by_me": {"approved_by_ann"},
            "started_by_me": set()},
    "bob": {"needs_me": {"started_by_sam", "approved_by_ann", "expiring", "nobodys"}, "approved_by_me": set(),
            "started_by_me": set()},
    "vic": {"needs_me": set(), "approved_by_me": set(), "started_by_me": set()},
}
EVERYONE = {"expiring": {"expiring"}, "all": {"started_by_sam", "approved_by_ann", "expiring", "nobodys"}}


def test_each_tab_holds_the_requests_its_rule_says_for_each_user(queue, people):
    seen, counted = {}, {}
    for user in MEMBERSHIP:
        client = client_for(people[user])
        for tab in TABS:
            html = client.get(reverse("approvals:inbox"), {"tab": tab}).content.decode()
            seen[user, tab] = {name for name, request in queue.items() if f"{request.id}/" in html}
            counted[user, tab] = tab_counts(people[user], {})[tab]
    expected = {(user, tab): {**MEMBERSHIP[user], **EVERYONE}[tab] for user in MEMBERSHIP for tab in TABS}
    assert seen == expected
    assert counted == {key: len(names) for key, names in expected.items()}


def test_the_tabs_show_their_counts_and_the_current_one(queue, people):
    html = client_for(people["ann"]).get(reverse("approvals:inbox"), {"tab": "needs_me"}).content.decode()
    assert re.search(r'class="tab tab-needs_me tab-current" aria-current="page">Needs me <span class="count">3</span>',
                     html)
    assert 'I approved, waiting for a second approver <span class="count">1</span>' in html
    assert 'Expiring within 1 h <span class="count">1</span>' in html and 'All <span class="count">4</span>' in html


def test_the_inbox_shows_the_absolute_expiry_as_a_machine_readable_time(queue, people):
    html = client_for(people["bob"]).get(reverse("approvals:inbox")).content.decode()
    expires = ApprovalRequest.objects.get(id=queue["expiring"].id).expires_at
    assert f'<time class="when" datetime="{expires:%Y-%m-%dT%H:%M:%SZ}">{expires:%Y-%m-%d %H:%M:%S} UTC</time>' in html


def test_a_bad_tab_is_a_400_naming_it(people):
    response = client_for(people["bob"]).get(reverse("approvals:inbox"), {"tab": "mine"})
    assert response.status_code == 400
    assert "Queue: Select a valid choice." in response.content.decode()


# The decision panel offers only what this user may still do, and says why not

def test_the_runs_starter_is_not_offered_approve_and_is_told_why(demo, people):
    _, request = waiting_claim(starter=people["sam"])
    html = client_for(people["sam"]).get(detail_url(request)).content.decode()
    assert 'name="verdict" value="approve"' not in html
    assert "You started this run, so you cannot decide its approval: another approver must decide it." in html


def test_after_my_approval_of_a_two_approver_request_my_page_waits_for_a_second_approver(demo, people):
    _, request = waiting_claim()
    needing_two(request)
    ann = client_for(people["ann"])
    answer = ann.post(reverse("approvals:decide", args=[request.id]),
                      {"verdict": "approve", "snapshot_hash": request.snapshot_hash}, **HTMX)
    html = answer.content.decode()
    assert answer.status_code == 200 and "Your approval is recorded (1 of 2)" in html
    assert 'name="verdict" value="approve"' not in html
    assert "You approved it; it waits for another approver (1 of 2 approvals)." in html
    assert 'name="verdict" value="approve"' in client_for(people["bob"]).get(detail_url(request)).content.decode()
    assert ann.get(detail_url(request), HTTP_IF_NONE_MATCH=shown_version(answer), **HTMX).status_code == 304


def test_when_another_approver_decides_my_poll_shows_their_decision(demo, people):
    _, request = waiting_claim()
    bob = client_for(people["bob"])
    version = bob.get(detail_url(request))["ETag"]
    assert bob.get(detail_url(request), HTTP_IF_NONE_MATCH=version, **HTMX).status_code == 304
    decide(request, people["ann"])
    polled = bob.get(detail_url(request), HTTP_IF_NONE_MATCH=version, **HTMX)
    html = polled.content.decode()
    assert polled.status_code == 200 and "APPROVED" in html and "by ann" in html
    assert 'name="verdict"' not in html


def test_the_losing_approver_gets_the_409_and_the_winners_decision(demo, people):
    _, request = waiting_claim()
    decide(request, people["ann"])  # ann wins while bob's page still offers the form
    answer = client_for(people["bob"]).post(reverse("approvals:decide", args=[request.id]),
                                            {"verdict": "approve", "snapshot_hash": request.snapshot_hash}, **HTMX)
    html = answer.content.decode()
    assert answer.status_code == 409 and "This request was already approved by ann" in html
    assert '<span class="status status-approved">APPROVED</span>' in html and 'name="verdict"' not in html


# A refused request and the one that replaced it

def asked_again(request: ApprovalRequest) -> ApprovalRequest:
    """What the gate does when a refused request's path is ask_again: the run's next ask in the same step."""
    ApprovalRequest.objects.filter(id=request.id).update(status="INVALIDATED", reason="the amount changed",
                                                         last_check={"current": {"amount": "150.00"},
                                                                     "problems": ["the amount changed"]})
    successor = ApprovalRequest.objects.get(id=request.id)
    successor.id, successor.ask, successor.status, successor.reason = uuid.uuid4(), request.ask + 1, "PENDING", ""
    successor.save(force_insert=True)
    return successor


def test_a_refused_request_links_to_its_successor_and_the_successor_back(demo, people):
    _, request = waiting_claim()
    successor = asked_again(request)
    bob = client_for(people["bob"])
    old_page = bob.get(detail_url(request)).content.decode()
    assert f'<a href="{detail_url(successor)}">ask #2 (PENDING)</a> replaces this request' in old_page
    new_page = bob.get(detail_url(successor)).content.decode()
    assert f'This request replaces <a href="{detail_url(request)}">ask #1 (INVALIDATED: the amount changed)</a>' \
        in new_page


def test_a_refused_stale_request_shows_its_facts_table_once(demo, people):
    _, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})
    answer = client_for(people["bob"]).post(reverse("approvals:decide", args=[request.id]),
                                            {"verdict": "approve", "snapshot_hash": request.snapshot_hash})
    html = answer.content.decode()
    assert answer.status_code == 409 and "INVALIDATED" in html
    assert html.count('<table class="facts">') == 1


def test_the_inbox_is_live_and_a_decision_changes_its_version(queue, people):
    bob = client_for(people["bob"])
    version = bob.get(reverse("approvals:inbox"))["ETag"]
    assert bob.get(reverse("approvals:inbox"), HTTP_IF_NONE_MATCH=version, **HTMX).status_code == 304
    decide(queue["nobodys"], people["ann"])
    polled = bob.get(reverse("approvals:inbox"), HTTP_IF_NONE_MATCH=version, **HTMX)
    assert polled.status_code == 200 and 'All <span class="count">3</span>' in polled.content.decode()
