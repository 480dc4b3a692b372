"""The approvals API: the inbox, the current facts, and decisions with their refusals."""
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from approvals.models import ApprovalDecision, ApprovalRequest
from tests.approvals.flow import waiting_claim
from tests.audit import operator_actions
from tests.conftest import assert_unauthenticated, make_user

pytestmark = pytest.mark.django_db

APPROVALS = "/api/approvals/"
VIEW, DECIDE = "approvals.view_approvalrequest", "approvals.decide_approvalrequest"


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def approver(db):
    return client_for(make_user("approver", VIEW, DECIDE))


@pytest.fixture
def viewer(db):
    return client_for(make_user("viewer", VIEW))


def test_the_inbox_lists_pending_requests_soonest_expiry_first(demo, viewer):
    _, later = waiting_claim("ORD-1001")
    _, sooner = waiting_claim("ORD-1003")
    ApprovalRequest.objects.filter(id=sooner.id).update(expires_at=timezone.now() + timedelta(hours=1))
    body = viewer.get(APPROVALS).json()
    assert [r["id"] for r in body["results"]] == [str(sooner.id), str(later.id)]
    assert body["results"][0]["approval_object"]["amount"] == "35.50"


def test_the_inbox_filters_by_kind_workflow_version_and_business_key(demo, viewer):
    _, request = waiting_claim("ORD-1001")
    waiting_claim("ORD-1003")
    for query in ({"business_key": "ORD-1001"}, {"kind": "refund", "business_key": "ORD-1001"},
                  {"workflow": "claims-agent", "version": 2, "business_key": "ORD-1001"}):
        assert [r["id"] for r in viewer.get(APPROVALS, query).json()["results"]] == [str(request.id)], query
    assert viewer.get(APPROVALS, {"version": 1}).json()["results"] == []
    assert viewer.get(APPROVALS, {"status": "APPROVED"}).json()["results"] == []


def test_a_bad_filter_is_a_400_naming_it(viewer):
    response = viewer.get(APPROVALS, {"version": "two", "status": "MAYBE"})
    assert response.status_code == 400 and set(response.json()) == {"version", "status"}


def test_one_request_shows_its_hashes_and_decisions(demo, viewer):
    _, request = waiting_claim()
    body = viewer.get(f"{APPROVALS}{request.id}/").json()
    assert (body["snapshot_hash"], body["object_hash"], body["decisions"]) == (
        request.snapshot_hash, request.object_hash, [])
    assert body["workflow_version"] == 2 and body["status"] == "PENDING"


def test_revalidation_shows_the_snapshot_beside_the_current_values(demo, viewer):
    _, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "amount": "150.00"})
    body = viewer.get(f"{APPROVALS}{request.id}/revalidation/").json()
    assert body["holds"] is False and body["current"]["amount"] == "150.00"
    assert body["differences"] == [{"key": "amount", "then": "120.00", "now": "150.00"}]
    assert ApprovalRequest.objects.get(id=request.id).status == "PENDING"  # looking decides nothing


def test_approving_returns_the_decided_request(demo, approver):
    _, request = waiting_claim()
    response = approver.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "APPROVED" and response.json()["decided_by"] == "approver"
    assert operator_actions().get().source == "api"


def test_a_stale_snapshot_hash_is_a_409(demo, approver):
    _, request = waiting_claim()
    response = approver.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": "0" * 64})
    assert response.status_code == 409 and response.json()["current_status"] == "PENDING"


def test_a_decision_on_moved_facts_is_a_409_with_the_current_values(demo, approver):
    _, request = waiting_claim()
    demo.state.upsert_order({"order_id": "ORD-1001", "refunded_amount": "120.00"})
    response = approver.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 409
    assert response.json()["current_status"] == "INVALIDATED"
    assert response.json()["current_values"]["refunded_amount"] == "120.00"


def test_a_second_approval_is_a_409_that_says_who_decided(demo, approver):
    _, request = waiting_claim()
    approver.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    other = client_for(make_user("other", VIEW, DECIDE))
    response = other.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 409 and "already approved by approver" in response.json()["detail"]


@pytest.mark.parametrize("body, field", [
    ({"reason": "no"}, "snapshot_hash"),
    ({"snapshot_hash": "not-a-hash", "reason": "no"}, "snapshot_hash"),
])
def test_malformed_decisions_are_400s_naming_the_field(demo, approver, body, field):
    _, request = waiting_claim()
    response = approver.post(f"{APPROVALS}{request.id}/reject/", body, format="json")
    assert response.status_code == 400 and field in response.json()


def test_a_rejection_without_a_reason_is_a_400(demo, approver):
    _, request = waiting_claim()
    response = approver.post(f"{APPROVALS}{request.id}/reject/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 400 and "reason" in response.json()
    assert not ApprovalDecision.objects.exists()


def test_deciding_needs_the_approver_permission(demo, viewer):
    _, request = waiting_claim()
    response = viewer.post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 403 and not ApprovalDecision.objects.exists()


def test_the_runs_starter_cannot_approve_it_through_the_api(demo):
    starter = make_user("starter", VIEW, DECIDE)
    _, request = waiting_claim(starter=starter)
    response = client_for(starter).post(f"{APPROVALS}{request.id}/approve/", {"snapshot_hash": request.snapshot_hash})
    assert response.status_code == 403 and "started this run" in response.json()["detail"]


def test_nothing_is_shown_to_anonymous_callers_or_users_without_the_view_permission(demo):
    _, request = waiting_claim()
    assert_unauthenticated(APIClient().get(APPROVALS))
    nobody = client_for(make_user("nobody"))
    assert nobody.get(APPROVALS).status_code == 403
    assert nobody.get(f"{APPROVALS}{request.id}/").status_code == 403
