"""The fields docs/api.md says an approval request and an operation carry are the fields the API returns: the
serializers', the OpenAPI schema's, and a real answer's, in the documented order. A field documented elsewhere
(`ApprovalRequest.visit` in docs/approvals.md) and not returned fails here too."""
from __future__ import annotations

import re

import pytest

from approvals.api.serializers import ApprovalDetailSerializer, ApprovalSerializer
from approvals.models import ApprovalRequest
from reconciliation.api.serializers import OperationSerializer
from tests.approvals.flow import waiting_claim
from tests.conftest import client_for, make_user
from tests.pages import ROOT

API_PAGE = (ROOT / "docs" / "api.md").read_text()
SECTION = API_PAGE.split("## What an approval request and an operation carry", 1)[1].split("\n## ", 1)[0]
DOCUMENTED = {label: item for label, item in zip(
    ("approval", "approval detail", "operation"), re.split(r"\n- ", SECTION)[1:], strict=True)}


def documented(label: str) -> list[str]:
    """The backquoted names of the item, up to its first full stop after the list (the explanation)."""
    listed = DOCUMENTED[label].split(":", 1)[1].split(". ", 1)[0]
    return re.findall(r"`([a-z_]+)`", listed)


def test_the_documented_fields_are_the_serializers_in_order():
    assert documented("approval") == list(ApprovalSerializer.Meta.fields)
    assert documented("operation") == list(OperationSerializer.Meta.fields)
    assert documented("approval") + documented("approval detail") == list(ApprovalDetailSerializer.Meta.fields)


@pytest.mark.django_db
def test_the_openapi_schema_describes_the_documented_fields():
    schema = client_for(make_user("reader", "durable.view_run")).get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    approval, detail = documented("approval"), documented("approval") + documented("approval detail")
    assert list(components["Approval"]["properties"]) == approval
    assert list(components["ApprovalDetail"]["properties"]) == detail
    assert list(components["Operation"]["properties"]) == documented("operation")


@pytest.mark.django_db
def test_an_approval_request_answers_with_its_visit_and_position(demo):
    _, request = waiting_claim()
    reader = client_for(make_user("reader", "durable.view_run", "approvals.view_approvalrequest"))
    [listed] = reader.get("/api/approvals/").json()["results"]
    assert list(listed) == documented("approval")
    assert (listed["visit"], listed["position"]) == (request.visit, request.position) and listed["position"] == 1
    one = reader.get(f"/api/approvals/{request.id}/").json()
    assert list(one) == documented("approval") + documented("approval detail")


def test_every_approval_field_the_docs_name_is_in_the_api():
    named = {field for page in (ROOT / "docs").glob("*.md")
             for field in re.findall(r"ApprovalRequest\.([a-z_]+)", page.read_text())} - {"objects"}
    assert named and named <= set(ApprovalSerializer.Meta.fields), named - set(ApprovalSerializer.Meta.fields)
    assert {field.name for field in ApprovalRequest._meta.get_fields()} >= named
