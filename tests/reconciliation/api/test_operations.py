"""The operations API: listing the ledger, and resolving UNKNOWN operations by hand."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from durable.engine.ledger import OperationStatus as Op
from durable.engine.states import RunStatus
from durable.models import JournalEntry, SideEffect
from durable.permissions import CONTENTS_PERMISSIONS
from tests.audit import operator_actions
from tests.conftest import ALL_RUN_PERMS, make_user
from tests.durable.claims import advance, needs_attention

pytestmark = pytest.mark.django_db

OPERATIONS = "/api/operations/"
SENT = {"notification_id": "ntf-1", "status": "sent"}
RESOLVER_PERMS = ("durable.resolve_sideeffect", *CONTENTS_PERMISSIONS, *ALL_RUN_PERMS)


def client_for(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def resolver(db):
    return make_user("resolver", *RESOLVER_PERMS)


@pytest.fixture
def api(resolver):
    return client_for(resolver)


def resolve_url(operation_id):
    return f"{OPERATIONS}{operation_id}/resolve/"


def post_resolve(client, row, **body):
    body.setdefault("reason", "checked the notifications provider's outbox")
    return client.post(resolve_url(row.operation_id), body, format="json")


def notifications(sandbox):
    return sandbox.state.calls_snapshot()["notifications"]


def nothing_changed(run, row):
    run.refresh_from_db()
    return (SideEffect.objects.get(pk=row.pk).status == Op.UNKNOWN and run.status == RunStatus.NEEDS_ATTENTION
            and not operator_actions().exists())


# Resolving


def test_an_operator_resolves_a_notification_as_sent_and_the_run_finishes_without_sending_it_again(demo, api, resolver):
    run, row = needs_attention(demo)
    response = post_resolve(api, row, outcome="succeeded", external_ref="ntf-1", result=SENT)
    assert response.status_code == 200
    assert (response.data["operation_id"], response.data["status"]) == (row.operation_id, "SUCCEEDED")
    assert (response.data["external_ref"], response.data["result_json"]) == ("ntf-1", SENT)
    assert (response.data["resolved_by"], response.data["run"]) == ("resolver", str(run.id))
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING

    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["notification_id"] == "ntf-1"
    assert notifications(demo)["effects"] == 1 and notifications(demo)["calls"] == 1


def test_an_operator_says_it_did_not_happen_and_the_run_sends_it_once_more_with_the_same_key(demo, api):
    run, row = needs_attention(demo, fault="hang")
    response = post_resolve(api, row, outcome="did_not_happen", follow_up="retry", reason="not in the outbox")
    assert (response.status_code, response.data["status"]) == (200, "FAILED_RETRYABLE")
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED
    assert notifications(demo)["effects"] == 1
    assert notifications(demo)["calls_by_key"] == {row.operation_id: 2}


def test_an_operator_says_it_did_not_happen_and_must_not_so_the_run_fails(demo, api):
    run, row = needs_attention(demo, fault="hang")
    response = post_resolve(api, row, outcome="did_not_happen", follow_up="fail", reason="customer unsubscribed")
    assert (response.status_code, response.data["status"]) == (200, "FAILED_FINAL")
    run = advance(run)
    assert run.status == RunStatus.FAILED and run.error["kind"] == "side_effect_failed"
    assert notifications(demo)["effects"] == 0


def test_a_resolution_is_audited_as_an_operator_action_and_in_the_runs_journal(demo, api, resolver):
    run, row = needs_attention(demo)
    post_resolve(api, row, outcome="succeeded", external_ref="ntf-1", result=SENT, reason="seen in the outbox")
    action = operator_actions().get()
    assert (action.action, action.operation_id, action.run_id, action.actor, action.source) == (
        "resolve_operation", row.operation_id, run.id, resolver, "api")
    assert (action.status_before, action.status_after, action.reason) == ("UNKNOWN", "SUCCEEDED", "seen in the outbox")
    entry = JournalEntry.objects.get(run=run, kind=JournalEntry.Kind.OPERATOR)
    assert (entry.detail["by"], entry.detail["operation_id"], entry.detail["reason"]) == (
        "resolver", row.operation_id, "seen in the outbox")


# Refusals


def test_an_operation_that_is_not_unknown_is_refused_with_its_current_status(demo, api):
    run, _ = needs_attention(demo)
    refund = SideEffect.objects.get(run=run, action_name="refund")
    response = post_resolve(api, refund, outcome="did_not_happen", follow_up="retry")
    assert response.status_code == 409
    assert response.data["current_status"] == "SUCCEEDED"
    assert refund.operation_id in response.data["detail"]
    assert SideEffect.objects.get(pk=refund.pk).status == Op.SUCCEEDED and not operator_actions().exists()


def test_resolving_an_operation_twice_is_refused_the_second_time(demo, api):
    _, row = needs_attention(demo)
    assert post_resolve(api, row, outcome="succeeded", external_ref="ntf-1").status_code == 200
    again = post_resolve(api, row, outcome="did_not_happen", follow_up="retry")
    assert (again.status_code, again.data["current_status"]) == (409, "SUCCEEDED")
    assert operator_actions().count() == 1


@pytest.mark.parametrize("body,field", [
    ({"outcome": "succeeded"}, "external_ref"),
    ({"outcome": "did_not_happen"}, "follow_up"),
    ({"outcome": "did_not_happen", "follow_up": "later"}, "follow_up"),
    ({"outcome": "succeeded", "external_ref": "ntf-1", "reason": ""}, "reason"),
    ({"outcome": "maybe"}, "outcome"),
    ({"outcome": "succeeded", "external_ref": "ntf-1", "result": ["sent"]}, "result"),
], ids=["no-external-ref", "no-follow-up", "bad-follow-up", "no-reason", "bad-outcome", "result-not-an-object"])
def test_a_resolution_without_what_it_needs_is_a_400_naming_the_field(demo, api, body, field):
    run, row = needs_attention(demo)
    response = post_resolve(api, row, **body)
    assert response.status_code == 400
    assert field in response.data
    assert nothing_changed(run, row)


def test_a_resolution_without_a_reason_field_at_all_is_a_400_naming_it(demo, api):
    run, row = needs_attention(demo)
    response = api.post(resolve_url(row.operation_id), {"outcome": "succeeded", "external_ref": "ntf-1"}, format="json")
    assert response.status_code == 400 and "reason" in response.data
    assert nothing_changed(run, row)


def test_resolving_needs_the_resolve_permission(demo):
    run, row = needs_attention(demo)
    viewer = make_user("viewer", *CONTENTS_PERMISSIONS, *ALL_RUN_PERMS)
    response = post_resolve(client_for(viewer), row, outcome="succeeded", external_ref="ntf-1")
    assert response.status_code == 403
    assert nothing_changed(run, row)


def test_anonymous_clients_cannot_resolve(demo):
    run, row = needs_attention(demo)
    response = post_resolve(APIClient(), row, outcome="succeeded", external_ref="ntf-1")
    assert response.status_code == 401
    assert nothing_changed(run, row)


def test_an_unknown_operation_id_is_a_404(api):
    response = api.post(resolve_url("0" * 32), {"outcome": "succeeded", "external_ref": "x", "reason": "r"},
                        format="json")
    assert response.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_of_two_resolutions_at_once_only_one_wins_and_the_other_gets_409(demo, sent):
    run, row = needs_attention(demo)
    sent.clear()  # the start of the run was sent; count what the resolutions send
    operators = [make_user(name, *RESOLVER_PERMS) for name in ("ann", "bob")]
    bodies = [{"outcome": "succeeded", "external_ref": "ntf-1", "reason": "seen in the outbox"},
              {"outcome": "did_not_happen", "follow_up": "retry", "reason": "not in the outbox"}]
    together = threading.Barrier(2)
    answers = {}

    def resolve_as(user, body):
        try:
            client = client_for(user)
            together.wait()
            answers[user.username] = client.post(resolve_url(row.operation_id), body, format="json")
        finally:
            connection.close()

    threads = [threading.Thread(target=resolve_as, args=pair) for pair in zip(operators, bodies, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(a.status_code for a in answers.values()) == [200, 409]
    [winner] = [name for name, answer in answers.items() if answer.status_code == 200]
    [loser] = [answer for answer in answers.values() if answer.status_code == 409]
    row.refresh_from_db()
    assert row.status == {"ann": Op.SUCCEEDED, "bob": Op.FAILED_RETRYABLE}[winner]
    assert loser.data["current_status"] == row.status
    assert list(operator_actions().values_list("actor__username", flat=True)) == [winner]
    assert JournalEntry.objects.filter(run=run, kind=JournalEntry.Kind.OPERATOR).count() == 1
    assert sent == [run.id]  # the run was handed back to a worker once, not twice


# Listing


def test_unknown_operations_are_listed_oldest_first(demo, api):
    _, newer = needs_attention(demo, order_id="ORD-1001")
    _, older = needs_attention(demo, order_id="ORD-1002")
    SideEffect.objects.filter(pk=older.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    response = api.get(OPERATIONS, {"status": "UNKNOWN"})
    assert response.status_code == 200
    assert [op["operation_id"] for op in response.data["results"]] == [older.operation_id, newer.operation_id]
    assert {op["status"] for op in response.data["results"]} == {"UNKNOWN"}
    assert response.data["results"][0]["action_name"] == "notify"


def test_listing_needs_the_view_permission(demo):
    needs_attention(demo)
    resolver_only = make_user("resolver-only", "durable.resolve_sideeffect")
    assert client_for(resolver_only).get(OPERATIONS, {"status": "UNKNOWN"}).status_code == 403
    assert APIClient().get(OPERATIONS, {"status": "UNKNOWN"}).status_code == 401


def test_listing_refuses_an_unknown_status_filter(api):
    response = api.get(OPERATIONS, {"status": "MAYBE"})
    assert response.status_code == 400 and "status" in response.data
