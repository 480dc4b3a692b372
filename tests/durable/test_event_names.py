"""Event names are matched exactly (docs/api.md), at every door an event comes in by: the API to a run, the API
by business key, and `durable.send_event` in code. A name with whitespace or a control character anywhere (a
final newline too) is a 400 naming `name`, never trimmed into another name; a name the run's workflow does not
declare, when it declares its events, is a 400 naming the declared ones, never a mailbox entry no wait takes."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

import durable
from durable import services
from durable.engine.waits import check_event_name
from durable.errors import InvalidInput
from durable.models import Run, RunEvent
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db

LISTEN = "test-wait-event"  # declares rated, reply, approved, declined, other, unrelated
UNTRIMMED = [" customer_reply\n", " reply", "reply ", "reply\n", "\treply", "reply\r\n", "re ply", "reply\x00",
             "reply\u2028", "reply\u00a0", "\u200breply", "ｒeply", "reply\x1b", ""]
Sender = Callable[[Run, str], tuple[int, dict[str, Any]]]


@pytest.fixture
def run(tmp_path) -> Run:
    run, _ = services.start_run(workflow=LISTEN, input={"calls_file": str(tmp_path / "calls"), "seconds": 0},
                                business_key="ORDER-7")
    return run


@pytest.fixture
def api(db) -> APIClient:
    return client_for(make_user("webhook", "durable.send_event"))


def by_run(api: APIClient) -> Sender:
    def send(run: Run, name: str) -> tuple[int, dict[str, Any]]:
        answer = api.post(f"/api/runs/{run.id}/events/", {"name": name, "payload": {"text": "hi"}}, format="json")
        return answer.status_code, answer.json()
    return send


def by_key(api: APIClient) -> Sender:
    def send(run: Run, name: str) -> tuple[int, dict[str, Any]]:
        body = {"workflow": LISTEN, "business_key": run.business_key, "name": name, "payload": {"text": "hi"}}
        answer = api.post("/api/events/", body, format="json")
        return answer.status_code, answer.json()
    return send


def in_code(api: APIClient) -> Sender:  # noqa: ARG001  (code needs no client)
    def send(run: Run, name: str) -> tuple[int, dict[str, Any]]:
        try:
            durable.send_event(run_id=run.id, name=name, payload={"text": "hi"}, sender="crm")
        except InvalidInput as refused:
            return 400, refused.errors
        return 201, {}
    return send


CHANNELS = {"api-to-the-run": by_run, "api-by-business-key": by_key, "durable.send_event": in_code}


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("name", UNTRIMMED, ids=repr)
def test_a_name_with_whitespace_or_a_control_character_is_a_400_naming_the_field(run, api, channel, name):
    status, body = CHANNELS[channel](api)(run, name)
    assert (status, list(body)) == (400, ["name"]), body
    assert not RunEvent.objects.exists()


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_name_the_workflow_does_not_declare_is_a_400_naming_the_declared_ones(run, api, channel):
    status, body = CHANNELS[channel](api)(run, "customer_reply")
    assert (status, list(body)) == (400, ["name"]), body
    message = str(body["name"])
    assert "takes no event 'customer_reply'" in message and "'rated', 'reply'" in message
    assert not RunEvent.objects.exists()


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_declared_name_is_delivered_under_exactly_that_name(run, api, channel):
    status, _ = CHANNELS[channel](api)(run, "reply")
    assert status == 201
    assert list(RunEvent.objects.values_list("name", flat=True)) == ["reply"]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=110))
def test_a_name_is_taken_as_given_or_refused_never_changed(name):
    try:
        taken = check_event_name(name)
    except ValueError:
        return
    assert taken is name and name.isascii() and name.isprintable() and not any(c.isspace() for c in name)


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(name=st.text(max_size=20) | st.sampled_from(["reply", "rated", "reply\n", " reply"]))
def test_any_name_sent_is_kept_exactly_as_sent_or_refused_naming_the_field(run, api, name):
    with transaction.atomic():
        status, body = by_run(api)(run, name)
        kept = list(RunEvent.objects.values_list("name", flat=True))
        transaction.set_rollback(True)
    assert status in (201, 400), body
    assert kept == ([name] if status == 201 else []) and (status == 201 or list(body) == ["name"])
