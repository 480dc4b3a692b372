"""The reconciliation console: what waits for reconciliation, one operation's evidence, asking its downstream
again, and resolving it (htmx and plain)."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from durable.conf import durable_settings
from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import SideEffect
from durable.permissions import CONTENTS_PERMISSIONS
from reconciliation.services import resolve_operation
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable.claims import needs_attention
from tests.durable.console.screens import HTMX, client_for

pytestmark = pytest.mark.django_db

VIEW, RESOLVE = CONTENTS_PERMISSIONS, "durable.resolve_sideeffect"
SENT = '{"notification_id": "ntf-1", "status": "sent"}'


@pytest.fixture
def viewer():
    return client_for(make_user("viewer", *VIEW))


@pytest.fixture
def resolver_user():
    return make_user("resolver", *VIEW, RESOLVE)


@pytest.fixture
def resolver(resolver_user):
    return client_for(resolver_user)


def list_url():
    return reverse("reconciliation:operations")


def operation_url(row):
    return reverse("reconciliation:operation", args=[row.operation_id])


def lookup_url(row):
    return reverse("reconciliation:lookup", args=[row.operation_id])


def resolve_url(row):
    return reverse("reconciliation:resolve", args=[row.operation_id])


def operation(run, action):
    return SideEffect.objects.get(run=run, action_name=action)


def set_status(row, status, *, seconds_ago=0):
    SideEffect.objects.filter(pk=row.pk).update(status=status, updated_at=timezone.now() - timedelta(seconds=seconds_ago))
    row.refresh_from_db()
    return row


def started_too_long(row, *, extra_seconds=60):
    return set_status(row, Op.STARTED, seconds_ago=durable_settings.DURABLE_RECONCILE_AFTER_SECONDS + extra_seconds)


def succeeded_form(**fields):
    return {"outcome": "succeeded", "external_ref": "ntf-1", "result": SENT,
            "reason": "seen in the notifications provider's outbox", **fields}


def unchanged(row, run):
    row.refresh_from_db()
    run.refresh_from_db()
    return (row.status == Op.UNKNOWN and run.status == RunStatus.NEEDS_ATTENTION
            and not operator_actions().exists())


# Who may look, who may act


def test_the_screens_live_under_reconciliation():
    assert list_url() == "/reconciliation/"
    assert resolve_url(SideEffect(operation_id="a" * 32)) == f"/reconciliation/{'a' * 32}/resolve/"


def test_anonymous_visitors_are_sent_to_the_login_page(demo):
    _, row = needs_attention(demo)
    anonymous = Client()
    for url in (list_url(), operation_url(row)):
        assert anonymous.get(url)["Location"] == f"{reverse('durable:login')}?next={url}"
    for url in (lookup_url(row), resolve_url(row)):
        response = anonymous.post(url, succeeded_form())
        assert response.status_code == 302 and response["Location"].startswith(reverse("durable:login"))
    assert SideEffect.objects.get(pk=row.pk).status == Op.UNKNOWN


def test_without_the_contents_permissions_the_screens_are_forbidden(demo):
    _, row = needs_attention(demo)
    outsider = client_for(make_user("outsider", "durable.view_run"))
    assert outsider.get(list_url()).status_code == 403
    assert outsider.get(operation_url(row)).status_code == 403


def test_a_viewer_may_not_ask_the_downstream_nor_resolve(demo, viewer):
    run, row = needs_attention(demo)
    assert viewer.post(lookup_url(row), **HTMX).status_code == 403
    assert viewer.post(resolve_url(row), succeeded_form(), **HTMX).status_code == 403
    assert unchanged(row, run)
    html = viewer.get(operation_url(row)).content.decode()
    assert "Only an operator allowed to resolve operations" in html
    assert 'name="outcome"' not in html


def test_resolve_and_lookup_take_only_posts(demo, resolver):
    _, row = needs_attention(demo)
    assert resolver.get(resolve_url(row)).status_code == 405
    assert resolver.get(lookup_url(row)).status_code == 405


def test_an_operation_that_does_not_exist_is_not_found(resolver):
    assert resolver.get(reverse("reconciliation:operation", args=["0" * 32])).status_code == 404


def test_the_nav_links_to_reconciliation_only_for_those_who_may_see_it(demo, viewer):
    assert f'href="{list_url()}"' in viewer.get(list_url()).content.decode()
    runs_only = client_for(make_user("runs-only", "durable.view_run"))
    assert f'href="{list_url()}"' not in runs_only.get(reverse("durable:runs")).content.decode()


# The list


def test_the_list_shows_unknown_and_long_started_operations_oldest_first_and_not_settled_ones(demo, viewer):
    run, notify = needs_attention(demo)
    ticket = started_too_long(operation(run, "ticket"))
    refund = operation(run, "refund")
    _, recent = needs_attention(demo, order_id="ORD-1002")
    recent = set_status(recent, Op.STARTED, seconds_ago=5)  # STARTED, but the reconciler's turn has not come

    response = viewer.get(list_url())
    html = response.content.decode()
    assert response.status_code == 200
    assert refund.status == Op.SUCCEEDED and refund.operation_id not in html
    assert recent.operation_id not in html
    assert html.index(ticket.operation_id) < html.index(notify.operation_id)  # the longest waiting first
    assert html.count('class="operation-row"') == 2
    row_html = html[html.index(notify.operation_id):]
    for shown in ("notify", "notifications", "ORD-1001", "UNKNOWN", reverse("durable:run-detail", args=[run.id]),
                  "claims-agent v1", "NEEDS_ATTENTION"):
        assert shown in row_html
    assert "tickets" in html and "STARTED" in html


def unknown_copies(row, count):
    """`count` more UNKNOWN operations of `row`'s run, each waiting one second less long than the one before."""
    now = timezone.now()
    copies = [SideEffect(operation_id=f"{i:032x}", run_id=row.run_id, step=f"{row.step}-{i}",
                         action_name=row.action_name, downstream=row.downstream, business_key=row.business_key,
                         request_hash=row.request_hash, payload=row.payload, status=Op.UNKNOWN)
              for i in range(count)]
    SideEffect.objects.bulk_create(copies)
    for i, copy in enumerate(copies):
        SideEffect.objects.filter(pk=copy.pk).update(updated_at=now - timedelta(hours=1, seconds=-i))
    return copies


def listed(row, html):
    return f"<code>{row.operation_id}</code>" in html


def test_the_list_is_paged_by_50_longest_waiting_first_and_each_page_links_the_next(demo, viewer):
    _, row = needs_attention(demo)
    copies = unknown_copies(row, 60)  # all waiting longer than `row`, oldest first

    first = viewer.get(list_url()).content.decode()
    assert first.count('class="operation-row"') == 50
    assert listed(copies[0], first) and not listed(copies[50], first)
    next_page = re.search(r'href="([^"]*after=[^"]*)" class="next-page"', first).group(1).replace("&amp;", "&")

    second = viewer.get(next_page).content.decode()
    assert second.count('class="operation-row"') == 11
    assert [listed(c, second) for c in copies[50:]] == [True] * 10 and listed(row, second)
    assert not listed(copies[49], second) and 'class="next-page"' not in second
    assert 'class="first-page"' in second


def test_a_forged_queue_page_is_a_400_naming_the_page(demo, viewer):
    needs_attention(demo)
    for forged in ("yesterday~" + "a" * 32, "2026-12-06T05:00:00+00:00~not-an-operation", "2026-12-06T05:00:00~" + "a" * 32):
        response = viewer.get(list_url(), {"after": forged})
        html = response.content.decode()
        assert response.status_code == 400, forged
        assert "Page: not a page of this queue" in html and 'class="operation-row"' not in html


def test_the_list_says_when_nothing_waits(viewer):
    assert "Nothing waits for reconciliation" in viewer.get(list_url()).content.decode()


# One operation


def test_the_operation_page_shows_the_ledger_row_the_run_and_the_journal_about_it(demo, viewer):
    run, row = needs_attention(demo)
    html = viewer.get(operation_url(row)).content.decode()
    for shown in (row.operation_id, row.request_hash, "ORD-1001",
                  "notifications", "Can be looked up", reverse("durable:run-detail", args=[run.id]),
                  "claims-agent v1", "NEEDS_ATTENTION", "needs_attention", "has no idempotency keys and no lookup"):
        assert shown in html
    assert f"<dt>Attempts</dt><dd>{row.attempts}</dd>" in html
    for key in row.payload:
        assert f"&quot;{key}&quot;" in html  # the payload, as indented JSON


def test_the_page_of_a_resolved_operation_shows_who_resolved_it_and_why(demo, viewer, resolver_user):
    _, row = needs_attention(demo)
    resolve_operation(operation_id=row.operation_id, user=resolver_user, outcome="succeeded", external_ref="ntf-9",
                      reason="customer forwarded the email", source="api")
    html = viewer.get(operation_url(row)).content.decode()
    assert "customer forwarded the email" in html and "ntf-9" in html and "resolver" in html
    assert "UNKNOWN → SUCCEEDED" in html


# Asking the downstream again


def test_asking_tickets_again_shows_its_record_and_fills_in_the_form_without_touching_the_ledger(demo, resolver):
    run, _ = needs_attention(demo)
    ticket = set_status(operation(run, "ticket"), Op.UNKNOWN)  # as if its answer had been lost
    response = resolver.post(lookup_url(ticket), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.startswith('<section id="lookup"')
    assert "Found" in html and f"tickets has {ticket.external_ref}" in html
    assert "the ledger is unchanged" in html
    # The finding fills in the resolution form out of band; the operator still decides.
    assert 'id="resolution" class="panel resolution" data-answer-panel hx-swap-oob="true"' in html
    assert f'value="{ticket.external_ref}"' in html
    assert SideEffect.objects.get(pk=ticket.pk).status == Op.UNKNOWN
    assert not operator_actions().exists()


def test_a_lookup_that_finds_no_record_says_so(demo, resolver):
    run, _ = needs_attention(demo)
    ticket = set_status(operation(run, "ticket"), Op.UNKNOWN)
    demo.state.reset()  # the tickets downstream forgets every ticket
    html = resolver.post(lookup_url(ticket), **HTMX).content.decode()
    assert "No record" in html and "tickets has no record" in html
    assert re.search(r'<input[^>]*value="did_not_happen"[^>]*checked', html)  # the form, filled in from it
    assert SideEffect.objects.get(pk=ticket.pk).status == Op.UNKNOWN


def test_a_lookup_the_downstream_does_not_answer_is_503_and_changes_nothing(demo, resolver):
    run, _ = needs_attention(demo)
    ticket = set_status(operation(run, "ticket"), Op.UNKNOWN)
    demo.state.arm_fault("tickets", "503")
    response = resolver.post(lookup_url(ticket), **HTMX)
    assert response.status_code == 503
    assert "Tickets did not answer the lookup" in response.content.decode()
    assert SideEffect.objects.get(pk=ticket.pk).status == Op.UNKNOWN


def test_notifications_cannot_be_looked_up_and_the_page_says_why(demo, resolver):
    _, row = needs_attention(demo)
    calls_before = demo.state.calls_snapshot()["notifications"]["calls"]
    page = resolver.get(operation_url(row)).content.decode()
    assert "Notifications cannot be looked up and ignores idempotency keys" in page
    assert "Ask the downstream again" not in page
    response = resolver.post(lookup_url(row), **HTMX)
    assert response.status_code == 200
    assert "Notifications cannot be looked up" in response.content.decode()
    assert demo.state.calls_snapshot()["notifications"]["calls"] == calls_before
    assert SideEffect.objects.get(pk=row.pk).status == Op.UNKNOWN


def test_without_htmx_a_lookup_answers_with_the_whole_page(demo, resolver):
    run, _ = needs_attention(demo)
    ticket = set_status(operation(run, "ticket"), Op.UNKNOWN)
    response = resolver.post(lookup_url(ticket))
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html
    assert f"tickets has {ticket.external_ref}" in html and f'value="{ticket.external_ref}"' in html


# Resolving


def test_resolving_succeeded_without_an_external_reference_is_400_naming_it_and_changes_nothing(demo, resolver):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form(external_ref=""), **HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert html.lstrip().startswith('<div id="operation-live"') and '<section id="resolution"' in html
    assert "External reference: required when the operation succeeded" in html
    assert "Nothing was resolved" in html
    assert "seen in the notifications provider&#x27;s outbox" in html  # the form keeps what was typed
    assert unchanged(row, run)


@pytest.mark.parametrize("result,error", [("[1, 2]", "must be a JSON object"), ("{nope", "not valid JSON")])
def test_a_result_that_is_not_a_json_object_is_400(demo, resolver, result, error):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form(result=result), **HTMX)
    assert response.status_code == 400
    assert f"Result (JSON object): {error}" in response.content.decode()
    assert unchanged(row, run)


def test_resolving_without_a_reason_is_400(demo, resolver):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form(reason=""), **HTMX)
    assert response.status_code == 400
    assert "Reason: say what evidence the resolution rests on" in response.content.decode()
    assert unchanged(row, run)


def test_resolving_succeeded_records_it_audits_it_and_puts_the_run_back_to_pending(demo, resolver, resolver_user):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form(), **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Recorded as SUCCEEDED with reference ntf-1" in html and "PENDING again" in html
    row.refresh_from_db()
    run.refresh_from_db()
    assert (row.status, row.external_ref, row.result_json) == (Op.SUCCEEDED, "ntf-1",
                                                               {"notification_id": "ntf-1", "status": "sent"})
    assert run.status == RunStatus.PENDING
    action = operator_actions().get()
    assert (action.action, action.source, action.actor, action.operation_id) == (
        "resolve_operation", "console", resolver_user, row.operation_id)
    assert (action.status_before, action.status_after) == ("UNKNOWN", "SUCCEEDED")
    assert 'name="outcome"' not in html  # resolved: no form any more


def test_did_not_happen_with_a_retry_leaves_it_to_be_sent_again_with_the_same_key(demo, resolver):
    run, row = needs_attention(demo, fault="hang")
    response = resolver.post(resolve_url(row), {"outcome": "did_not_happen", "follow_up": "retry",
                                                "reason": "not in the outbox"}, **HTMX)
    assert response.status_code == 200
    assert "sends it again with the same key" in response.content.decode()
    assert SideEffect.objects.get(pk=row.pk).status == Op.FAILED_RETRYABLE
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


def test_did_not_happen_needs_a_follow_up(demo, resolver):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), {"outcome": "did_not_happen", "reason": "not sent"}, **HTMX)
    assert response.status_code == 400
    assert "If it did not happen: choose" in response.content.decode()
    assert unchanged(row, run)


def test_without_htmx_a_resolution_redirects_to_the_operation_with_a_message(demo, resolver):
    _, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form())
    assert response.status_code == 302 and response["Location"] == operation_url(row)
    html = resolver.get(response["Location"]).content.decode()
    assert "Recorded as SUCCEEDED with reference ntf-1" in html


def test_without_htmx_a_refused_resolution_renders_the_page_with_its_status(demo, resolver):
    run, row = needs_attention(demo)
    response = resolver.post(resolve_url(row), succeeded_form(external_ref=""))
    assert response.status_code == 400 and "<html" in response.content.decode()
    assert unchanged(row, run)


def test_resolving_an_operation_that_is_no_longer_unknown_is_409_with_why(demo, resolver, resolver_user):
    _, row = needs_attention(demo)
    resolve_operation(operation_id=row.operation_id, user=resolver_user, outcome="succeeded", external_ref="ntf-1",
                      reason="someone else was faster", source="api")
    response = resolver.post(resolve_url(row), succeeded_form(external_ref="ntf-2"), **HTMX)
    html = response.content.decode()
    assert response.status_code == 409
    assert f"Operation {row.operation_id} is SUCCEEDED, not UNKNOWN" in html
    assert "Reload this operation" in html and 'name="outcome"' not in html
    assert SideEffect.objects.get(pk=row.pk).external_ref == "ntf-1"
    assert operator_actions().count() == 1


def test_a_settled_operation_offers_no_form(demo, resolver):
    run, _ = needs_attention(demo)
    refund = operation(run, "refund")
    html = resolver.get(operation_url(refund)).content.decode()
    assert "It is SUCCEEDED: nothing to resolve by hand" in html and 'name="outcome"' not in html
    assert "Payments cannot be looked up, but it honours Idempotency-Key" in html
    response = resolver.post(resolve_url(refund), {"outcome": "did_not_happen", "follow_up": "retry",
                                                   "reason": "r"}, **HTMX)
    assert response.status_code == 409 and "not UNKNOWN" in response.content.decode()


# The navigation's count of UNKNOWN operations


def test_the_navigation_counts_unknown_operations_for_those_who_may_see_the_ledger(demo, viewer):
    needs_attention(demo)
    needs_attention(demo, order_id="ORD-1002")
    html = viewer.get(list_url()).content.decode()
    assert re.search(r'Reconciliation <span id="unknown-badge" class="badge"[^>]*>2</span></a>', html)
    runs_only = client_for(make_user("runs-only", "durable.view_run")).get(reverse("durable:runs")).content.decode()
    assert "unknown-badge" not in runs_only


def test_a_resolution_changes_every_live_screens_version_and_its_answer_carries_the_new_count(demo, viewer,
                                                                                             resolver_user):
    _, row = needs_attention(demo)
    version = viewer.get(list_url())["ETag"]
    before = viewer.get(list_url(), **HTMX).content.decode()
    assert '<span id="unknown-badge" class="badge" title="UNKNOWN operations waiting for an operator" ' \
           'hx-swap-oob="true">1</span>' in before
    resolve_operation(operation_id=row.operation_id, user=resolver_user, outcome="succeeded", external_ref="ntf-9",
                      reason="customer forwarded the email", source="api")
    polled = viewer.get(list_url(), HTTP_IF_NONE_MATCH=version, **HTMX)
    assert polled.status_code == 200
    assert re.search(r'<span id="unknown-badge" class="badge badge-empty"[^>]*hx-swap-oob="true">0</span>',
                     polled.content.decode())
