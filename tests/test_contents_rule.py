"""One rule decides who sees a run's contents (checkpoint state, journal entries, ledger rows), whichever endpoint
or screen serves them: durable.permissions.can_see_contents. `durable.view_run` alone shows a run's status and
metadata, never its contents; with the contents permissions every way in shows them.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client
from django.utils import timezone

from durable.engine.states import RunStatus
from durable.models import Checkpoint, JournalEntry, OperatorAction, Run, RunEvent, SideEffect
from durable.permissions import CONTENTS_PERMISSIONS
from tests.conftest import api_token, make_user
from tests.durable.console.screens import run_in

pytestmark = pytest.mark.django_db

STATE, RESULT, LEDGER, EVIDENCE = "state-marker-7a1", "llm-result-marker-3c9", "ledger-marker-5e2", "evidence-marker-d41"
PAYLOAD = "event-payload-marker-9b8"
OPERATION_ID = "e" * 32
SEES_RUNS = ("durable.view_run", "durable.view_operatoraction")  # runs and the audit trail, not their contents


@dataclass(frozen=True)
class Way:
    """One endpoint or screen that serves contents, the marker it shows, and what it does without the rule."""

    name: str
    path: str
    marker: str
    refuses: bool  # True: a 403; False: answers, without the contents
    api: bool = False


def ways(run: Run) -> list[Way]:
    return [
        Way("API run detail: checkpoints", f"/api/runs/{run.id}/", STATE, refuses=False, api=True),
        Way("API run detail: journal", f"/api/runs/{run.id}/", RESULT, refuses=False, api=True),
        Way("API run detail: ledger", f"/api/runs/{run.id}/", LEDGER, refuses=False, api=True),
        Way("API run mailbox: event payloads", f"/api/runs/{run.id}/events/", PAYLOAD, refuses=False, api=True),
        Way("API operations list", "/api/operations/", LEDGER, refuses=True, api=True),
        Way("API operation", f"/api/operations/{OPERATION_ID}/", LEDGER, refuses=True, api=True),
        Way("run page: timeline's recorded result", f"/runs/{run.id}/", RESULT, refuses=False),
        Way("run page: ledger", f"/runs/{run.id}/", LEDGER, refuses=False),
        Way("checkpoint page", f"/runs/{run.id}/checkpoints/1/", STATE, refuses=True),
        Way("reconciliation list", "/reconciliation/", LEDGER, refuses=True),
        Way("reconciliation operation", f"/reconciliation/{OPERATION_ID}/", LEDGER, refuses=True),
        Way("audit trail: an operation's evidence", "/audit/", EVIDENCE, refuses=False),
        Way("audit CSV: an operation's evidence", "/audit/export.csv", EVIDENCE, refuses=False),
    ]


@pytest.fixture
def run() -> Run:
    run = run_in(RunStatus.NEEDS_ATTENTION, business_key="ORD-7")
    now = timezone.now()
    Checkpoint.objects.create(run=run, seq=1, step="plan", next_step="refund", state={"plan": STATE},
                              state_schema_version=1, created_at=now)
    JournalEntry.objects.create(run=run, kind=JournalEntry.Kind.ACTIVITY, step="plan", call_index=0, name="llm",
                                result={"answer": RESULT}, created_at=now)
    SideEffect.objects.create(operation_id=OPERATION_ID, run=run, step="refund", action_name=LEDGER,
                              downstream="payments", business_key="ORD-7", request_hash="0" * 64, status="UNKNOWN")
    OperatorAction.objects.create(action="resolve_operation", run=run, operation_id=OPERATION_ID, source="console",
                                  status_before="UNKNOWN", status_after="SUCCEEDED", reason=EVIDENCE)
    RunEvent.objects.create(run=run, name="customer_reply", payload={"text": PAYLOAD}, request_hash="0" * 64,
                            sender="api:someone", received_at=now)
    return run


def fetch(way: Way, user) -> tuple[int, str]:
    if way.api:  # as integrations call: with a token
        client = Client(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    else:
        client = Client()
        client.force_login(user)
    response = client.get(way.path)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, body.decode()


def test_with_view_run_alone_no_endpoint_or_screen_shows_contents(run):
    viewer = make_user("viewer-only", *SEES_RUNS)
    wrong = []
    for way in ways(run):
        status, body = fetch(way, viewer)
        expected = 403 if way.refuses else 200
        if status != expected or way.marker in body:
            wrong.append(f"{way.name}: {status}, marker {'shown' if way.marker in body else 'hidden'}")
    assert wrong == []


def test_with_the_contents_permissions_every_endpoint_and_screen_shows_them(run):
    reader = make_user("reader", *SEES_RUNS, *CONTENTS_PERMISSIONS)
    wrong = []
    for way in ways(run):
        status, body = fetch(way, reader)
        if status != 200 or way.marker not in body:
            wrong.append(f"{way.name}: {status}, marker {'shown' if way.marker in body else 'hidden'}")
    assert wrong == []


def test_without_contents_the_run_shows_its_status_and_metadata_and_says_what_is_left_out(run):
    viewer = make_user("viewer-only", *SEES_RUNS)
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token(viewer)}")
    body = client.get(f"/api/runs/{run.id}/").json()
    assert body["status"] == "NEEDS_ATTENTION" and body["business_key"] == "ORD-7"
    assert not {"checkpoints", "journal", "side_effects"} & set(body)
    page = Client()
    page.force_login(viewer)
    html = page.get(f"/runs/{run.id}/").content.decode()
    assert "NEEDS_ATTENTION" in html and "ORD-7" in html and "contents" in html and "are not shown" in html


def test_one_of_the_three_permissions_is_not_enough(run):
    partial = make_user("ledger-only", "durable.view_run", "durable.view_sideeffect")
    assert fetch(Way("API operations list", "/api/operations/", LEDGER, refuses=True, api=True), partial)[0] == 403
    assert fetch(Way("reconciliation list", "/reconciliation/", LEDGER, refuses=True), partial)[0] == 403


@pytest.mark.parametrize("model", ["checkpoint", "journalentry", "sideeffect"])
def test_the_admin_applies_the_same_rule(run, model):
    staff_with_one = make_user(f"staff-{model}", f"durable.view_{model}")
    staff_with_one.is_staff = True
    staff_with_one.save()
    staff_with_all = make_user("staff-all", *CONTENTS_PERMISSIONS)
    staff_with_all.is_staff = True
    staff_with_all.save()
    for user, expected in ((staff_with_one, 403), (staff_with_all, 200)):
        client = Client()
        client.force_login(user)
        assert client.get(f"/admin/durable/{model}/").status_code == expected, user.username
