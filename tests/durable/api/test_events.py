"""The events API (durable/api/events.py): an event sent to a run by id or by business key, once per
Idempotency-Key, refused with the reason (400 naming the field, 404, 409, 403, 401) and then nothing written;
and a run's mailbox, read under the contents rule."""
import json

import pytest
from rest_framework.test import APIClient

from durable import services
from durable.engine.json_values import MAX_JSON_DEPTH
from durable.engine.states import RunStatus
from durable.models import JournalEntry, OperatorAction, Run, RunEvent
from durable.permissions import CONTENTS_PERMISSIONS
from tests.conftest import api_token, assert_unauthenticated, client_for, make_user
from tests.durable.claims import advance

pytestmark = pytest.mark.django_db

SEND = "durable.send_event"
BY_KEY = "/api/events/"
LISTEN = "test-wait-event"  # waits for "reply" (or what `names` says); allows several active runs per key


def to_run(run: Run) -> str:
    return f"/api/runs/{run.id}/events/"


def start(tmp_path, key: str = "ORDER-7", **given) -> Run:
    run, _ = services.start_run(workflow=LISTEN, input={"calls_file": str(tmp_path / "calls"), "seconds": 0, **given},
                                business_key=key)
    return run


def waiting(tmp_path, key: str = "ORDER-7", **given) -> Run:
    run = advance(start(tmp_path, key, **given))
    assert run.status == RunStatus.WAITING
    return run


@pytest.fixture
def webhook(db):
    """A service account that may send events and nothing else."""
    return make_user("webhook", SEND)


@pytest.fixture
def api(webhook) -> APIClient:
    return client_for(webhook)


def nothing_written() -> bool:
    return not RunEvent.objects.exists() and not OperatorAction.objects.filter(action="send_event").exists() and \
        not JournalEntry.objects.filter(kind=JournalEntry.Kind.EVENT_RECEIVED).exists()


# Sending

def test_an_event_sent_to_a_waiting_run_answers_201_wakes_it_and_is_audited_with_its_sender(tmp_path, api, webhook):
    run = waiting(tmp_path)
    response = api.post(to_run(run), {"name": "reply", "payload": {"text": "yes, refund it"}}, format="json")
    assert response.status_code == 201, response.content
    event = RunEvent.objects.get()
    assert response.json() == {
        "id": event.id, "run_id": str(run.id), "name": "reply", "sender": "api:webhook",
        "received_at": response.json()["received_at"], "woke_run": True, "consumed_at": None}
    assert event.sent_by == webhook and event.payload == {"text": "yes, refund it"}
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    action = OperatorAction.objects.get(action="send_event")
    assert (action.actor, action.source, action.run_id) == (webhook, "api", run.id)
    assert action.detail["sender"] == "api:webhook" and action.detail["event"] == event.id
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.output["received"] == [["reply", {"text": "yes, refund it"}]]


def test_an_event_sent_before_the_run_waits_is_kept_in_its_mailbox_without_waking_it(tmp_path, api):
    run = start(tmp_path)
    response = api.post(to_run(run), {"name": "reply", "payload": {"text": "early"}}, format="json")
    assert response.status_code == 201
    assert (response.json()["woke_run"], response.json()["consumed_at"]) == (False, None)
    run = advance(run)
    assert run.status == RunStatus.SUCCEEDED and run.output["received"] == [["reply", {"text": "early"}]]


def test_an_event_without_a_payload_carries_null(tmp_path, api):
    run = waiting(tmp_path)
    assert api.post(to_run(run), {"name": "reply"}, format="json").status_code == 201
    assert advance(run).output["received"] == [["reply", None]]


def test_an_event_by_business_key_reaches_the_keys_active_run(tmp_path, api):
    run = waiting(tmp_path, key="ORDER-8")
    body = {"workflow": LISTEN, "business_key": "ORDER-8", "name": "reply", "payload": {"text": "hi"}}
    response = api.post(BY_KEY, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["run_id"] == str(run.id) and response.json()["woke_run"] is True
    assert RunEvent.objects.get().run_id == run.id


@pytest.mark.parametrize("target", ["run", "key"])
def test_the_same_event_sent_five_times_with_one_idempotency_key_is_one_event(tmp_path, api, target):
    run = waiting(tmp_path)
    url, body = (to_run(run), {}) if target == "run" else (BY_KEY, {"workflow": LISTEN, "business_key": "ORDER-7"})
    body = {**body, "name": "reply", "payload": {"text": "hi"}}
    answers = [api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="hook-1") for _ in range(5)]
    assert [a.status_code for a in answers] == [201, 200, 200, 200, 200]
    assert all(a.json() == answers[0].json() for a in answers)  # the first delivery's answer, woke_run and all
    assert [a.get("Durable-Existing-Event") for a in answers] == [None] + ["idempotency-key"] * 4
    assert RunEvent.objects.count() == 1
    assert OperatorAction.objects.filter(action="send_event").count() == 1
    assert JournalEntry.objects.filter(kind=JournalEntry.Kind.EVENT_RECEIVED).count() == 1


def test_the_idempotency_key_may_also_come_in_the_body(tmp_path, api):
    run = waiting(tmp_path)
    body = {"name": "reply", "payload": 1}
    first = api.post(to_run(run), {**body, "idempotency_key": "hook-2"}, format="json")
    header = api.post(to_run(run), body, format="json", HTTP_IDEMPOTENCY_KEY="hook-2")
    assert (first.status_code, header.status_code) == (201, 200)
    assert first.json()["id"] == header.json()["id"] and RunEvent.objects.count() == 1


def test_a_replay_after_the_event_was_consumed_says_so_and_keeps_one_event(tmp_path, api):
    run = waiting(tmp_path, events=2)
    first = api.post(to_run(run), {"name": "reply", "payload": 1}, format="json", HTTP_IDEMPOTENCY_KEY="hook-3")
    advance(run)  # takes it, waits for a second one
    again = api.post(to_run(run), {"name": "reply", "payload": 1}, format="json", HTTP_IDEMPOTENCY_KEY="hook-3")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["consumed_at"] is None and again.json()["consumed_at"] is not None
    assert again.json()["woke_run"] is True and RunEvent.objects.count() == 1
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING  # the replay woke nothing: the second wait still waits


@pytest.mark.parametrize("target", ["run", "key"])
def test_a_webhook_retried_after_the_run_ended_gets_its_event_back_not_a_409(tmp_path, api, target):
    """The run took the event and ended before the sender heard the answer: its retry is the same event (200),
    and by business key it does not reach a newer run of the key."""
    run = waiting(tmp_path)
    url, body = (to_run(run), {}) if target == "run" else (BY_KEY, {"workflow": LISTEN, "business_key": "ORDER-7"})
    body = {**body, "name": "reply", "payload": {"text": "hi"}}
    first = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="hook-4")
    assert advance(run).status == RunStatus.SUCCEEDED
    newer = waiting(tmp_path)  # the key's next run
    again = api.post(url, body, format="json", HTTP_IDEMPOTENCY_KEY="hook-4")
    assert (first.status_code, again.status_code) == (201, 200), again.content
    assert again.json()["id"] == first.json()["id"] and again.json()["run_id"] == str(run.id)
    assert RunEvent.objects.count() == 1 and not RunEvent.objects.filter(run=newer).exists()


def test_the_same_idempotency_key_with_another_event_is_a_409_and_sends_nothing(tmp_path, api):
    run = waiting(tmp_path, events=2)
    first = api.post(to_run(run), {"name": "reply", "payload": 1}, format="json", HTTP_IDEMPOTENCY_KEY="hook-5")
    for other in ({"name": "reply", "payload": 2}, {"name": "other", "payload": 1}):
        response = api.post(to_run(run), other, format="json", HTTP_IDEMPOTENCY_KEY="hook-5")
        assert response.status_code == 409, response.content
        assert "Idempotency-Key" in response.json()["detail"] and response.json()["event_id"] == first.json()["id"]
    assert RunEvent.objects.count() == 1


def test_a_token_client_sends_with_the_idempotency_key_header(tmp_path, webhook):
    run = waiting(tmp_path)
    client = APIClient(HTTP_AUTHORIZATION=f"Token {api_token(webhook)}")
    answers = [client.post(to_run(run), {"name": "reply"}, format="json", HTTP_IDEMPOTENCY_KEY="k")
               for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 200]
    assert RunEvent.objects.get().sender == "api:webhook"


# Refusals: each writes nothing

def test_an_unknown_run_is_a_404(api):
    response = api.post("/api/runs/00000000-0000-0000-0000-000000000000/events/", {"name": "reply"}, format="json")
    assert response.status_code == 404 and nothing_written()


def test_an_unknown_business_key_is_a_404_naming_it(tmp_path, api):
    waiting(tmp_path, key="ORDER-7")
    for workflow, key in ((LISTEN, "NO-SUCH-KEY"), ("no-such-workflow", "ORDER-7")):
        response = api.post(BY_KEY, {"workflow": workflow, "business_key": key, "name": "reply"}, format="json")
        assert response.status_code == 404, response.content
        assert key in response.json()["detail"] and workflow in response.json()["detail"]
    assert nothing_written()


@pytest.mark.parametrize("target", ["run", "key"])
def test_an_event_for_a_run_that_has_ended_is_a_409_naming_its_status(tmp_path, api, target):
    run = waiting(tmp_path)
    Run.objects.filter(id=run.id).update(status=RunStatus.CANCELLED)
    url, body = (to_run(run), {}) if target == "run" else (BY_KEY, {"workflow": LISTEN, "business_key": "ORDER-7"})
    response = api.post(url, {**body, "name": "reply"}, format="json")
    assert response.status_code == 409, response.content
    assert response.json()["current_status"] == "CANCELLED" and "CANCELLED" in response.json()["detail"]
    if target == "key":
        assert response.json()["run_id"] == str(run.id)
    assert nothing_written()


def test_a_business_key_with_several_active_runs_is_a_409_naming_them_and_the_sender_picks_one(tmp_path, api):
    runs = [waiting(tmp_path, key="SHARED"), waiting(tmp_path, key="SHARED")]
    body = {"workflow": LISTEN, "business_key": "SHARED", "name": "reply"}
    response = api.post(BY_KEY, body, format="json")
    assert response.status_code == 409, response.content
    assert sorted(response.json()["runs"]) == sorted(str(run.id) for run in runs)
    assert nothing_written()
    picked = api.post(to_run(runs[1]), {"name": "reply"}, format="json")
    assert picked.status_code == 201 and picked.json()["run_id"] == str(runs[1].id)


# A bad value for each field: (field, value, what the 400 says)
BAD_FIELDS = [
    ("name", None, "may not be null"),
    ("name", "", "may not be blank"),
    ("name", ["reply"], "Not a valid string"),
    ("name", "no spaces", "an event name is"),
    ("name", "r" * 101, "no more than 100"),
    ("name", "re\x00ply", "Null characters"),
    ("payload", {"text": "nul\x00"}, "NUL"),
    ("payload", {"deep": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)}, f"more than {MAX_JSON_DEPTH}"),
    ("idempotency_key", "k" * 201, "200 characters"),
    ("idempotency_key", "", "may not be blank"),
    ("idempotency_key", ["k"], "Not a valid string"),
]
BAD_KEY_FIELDS = [
    ("workflow", ["test-wait-event"], "Not a valid string"),
    ("workflow", "w" * 101, "no more than 100"),
    ("business_key", {"id": 1}, "Not a valid string"),
    ("business_key", "k" * 201, "no more than 200"),
    ("business_key", "ORDER\x00", "Null characters"),
]


@pytest.mark.parametrize("field,value,says", BAD_FIELDS + BAD_KEY_FIELDS,
                         ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD_FIELDS + BAD_KEY_FIELDS)])
def test_a_bad_field_is_a_400_naming_it_and_writes_nothing(tmp_path, api, field, value, says):
    run = waiting(tmp_path)
    body = {"workflow": LISTEN, "business_key": "ORDER-7", "name": "reply", "payload": {"text": "hi"}, field: value}
    urls = [BY_KEY] if field in ("workflow", "business_key") else [to_run(run), BY_KEY]
    for url in urls:
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        assert field in response.json() and says in json.dumps(response.json()[field]), response.json()
    assert nothing_written() and Run.objects.get().status == RunStatus.WAITING


@pytest.mark.parametrize("field", ["workflow", "business_key", "name"])
def test_a_missing_field_is_a_400_naming_it(tmp_path, api, field):
    waiting(tmp_path)
    body = {"workflow": LISTEN, "business_key": "ORDER-7", "name": "reply"}
    del body[field]
    response = api.post(BY_KEY, body, format="json")
    assert response.status_code == 400 and "required" in json.dumps(response.json()[field])
    assert nothing_written()


def test_an_idempotency_key_header_the_database_cannot_keep_is_a_400_naming_it(tmp_path, api):
    run = waiting(tmp_path)
    response = api.post(to_run(run), {"name": "reply"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
    assert response.status_code == 400 and "idempotency_key" in response.json()
    assert nothing_written()


@pytest.mark.parametrize("number", ["1e999", "-1e999"])
def test_a_payload_no_database_stores_is_a_400_naming_it(tmp_path, api, number):
    run = waiting(tmp_path)
    text = json.dumps({"name": "reply", "payload": {"amount": "@"}}).replace('"@"', number)
    response = api.post(to_run(run), text, content_type="application/json")
    assert response.status_code == 400 and "finite numbers only" in json.dumps(response.json()["payload"])
    assert nothing_written()


def test_a_payload_over_the_event_size_limit_is_a_400_naming_the_setting(tmp_path, api, settings):
    settings.DURABLE_EVENT_MAX_BYTES = 100
    run = waiting(tmp_path)
    response = api.post(to_run(run), {"name": "reply", "payload": {"text": "x" * 100}}, format="json")
    assert response.status_code == 400 and "DURABLE_EVENT_MAX_BYTES" in json.dumps(response.json()["payload"])
    assert nothing_written()


def test_a_payload_against_the_model_the_workflow_declares_is_a_400_naming_each_field(tmp_path, api):
    run = waiting(tmp_path, names=["rated"])
    response = api.post(to_run(run), {"name": "rated", "payload": {"rating": "lots"}}, format="json")
    assert response.status_code == 400, response.content
    assert {"payload.text", "payload.rating"} <= set(response.json())
    assert nothing_written()
    accepted = api.post(to_run(run), {"name": "rated", "payload": {"text": "good", "rating": 5}}, format="json")
    assert accepted.status_code == 201


# Who may send and read

@pytest.mark.parametrize("method,target", [("post", "run"), ("post", "key"), ("get", "run")])
def test_anonymous_clients_are_refused_with_a_401(tmp_path, method, target):
    run = waiting(tmp_path)
    url = to_run(run) if target == "run" else BY_KEY
    body = {"workflow": LISTEN, "business_key": "ORDER-7", "name": "reply"}
    response = getattr(APIClient(), method)(url, body, format="json") if method == "post" else APIClient().get(url)
    assert_unauthenticated(response)
    assert nothing_written()


@pytest.mark.parametrize("target", ["run", "key"])
def test_sending_without_the_send_event_permission_is_a_403_naming_it(tmp_path, target):
    run = waiting(tmp_path)
    everything_else = make_user("almost", "durable.view_run", "durable.start_run", "durable.cancel_run",
                                "durable.retry_run", "durable.resume_run", *CONTENTS_PERMISSIONS)
    url = to_run(run) if target == "run" else BY_KEY
    response = client_for(everything_else).post(
        url, {"workflow": LISTEN, "business_key": "ORDER-7", "name": "reply"}, format="json")
    assert response.status_code == 403 and SEND in response.json()["detail"]
    assert nothing_written() and Run.objects.get().status == RunStatus.WAITING


def test_reading_the_mailbox_needs_view_run_and_sending_does_not(tmp_path, api):
    """A sender without view_run (the webhook role) reads the mailbox only of a run it sent an event to: any other
    run is 404, as one that does not exist (durable/api/permissions.py, SENDERS_READ)."""
    run, other = waiting(tmp_path), waiting(tmp_path, key="ORDER-8")
    assert api.get(to_run(run)).status_code == 404
    assert api.post(to_run(run), {"name": "reply"}, format="json").status_code == 201
    assert api.get(to_run(run)).status_code == 200
    assert api.get(to_run(other)).status_code == 404


# The mailbox

def test_the_mailbox_lists_events_in_arrival_order_with_which_wait_took_each(tmp_path, api):
    run = waiting(tmp_path)
    for n, name in enumerate(["unrelated", "reply", "reply"]):
        api.post(to_run(run), {"name": name, "payload": {"n": n}}, format="json")
    advance(run)
    reader = client_for(make_user("reader", "durable.view_run", *CONTENTS_PERMISSIONS))
    events = reader.get(to_run(run)).json()["results"]
    assert [(e["name"], e["payload"]) for e in events] == [("unrelated", {"n": 0}), ("reply", {"n": 1}),
                                                           ("reply", {"n": 2})]
    assert [(e["consumed_step"], e["consumed_visit"]) for e in events] == [("", None), ("listen", 0), ("", None)]
    assert [e["consumed_at"] is not None for e in events] == [False, True, False]
    assert {e["sender"] for e in events} == {"api:webhook"}


def test_the_mailbox_shows_payloads_only_under_the_contents_rule(tmp_path, api):
    run = waiting(tmp_path)
    api.post(to_run(run), {"name": "reply", "payload": {"secret": "card 4242"}}, format="json")
    metadata_only = client_for(make_user("metadata", "durable.view_run")).get(to_run(run))
    assert metadata_only.status_code == 200
    [event] = metadata_only.json()["results"]
    assert "payload" not in event and event["name"] == "reply" and "4242" not in metadata_only.content.decode()


def test_the_mailbox_pages_by_arrival(tmp_path, api):
    run = start(tmp_path)
    for n in range(5):
        api.post(to_run(run), {"name": "reply", "payload": n}, format="json")
    reader = client_for(make_user("reader", "durable.view_run", *CONTENTS_PERMISSIONS))
    seen, url = [], f"{to_run(run)}?page_size=2"
    while url:
        page = reader.get(url).json()
        seen += [event["payload"] for event in page["results"]]
        url = page["next"]
    assert seen == [0, 1, 2, 3, 4]


def test_the_mailbox_of_an_unknown_run_is_a_404(db):
    reader = client_for(make_user("reader", "durable.view_run"))
    assert reader.get("/api/runs/00000000-0000-0000-0000-000000000000/events/").status_code == 404


# The schema

def test_the_openapi_schema_describes_the_event_endpoints(db):
    client = client_for(make_user("reader", "durable.view_run"))
    schema = client.get("/api/schema/", {"format": "json"}).json()
    assert set(schema["paths"]["/api/runs/{id}/events/"]) == {"get", "post"}
    assert set(schema["paths"]["/api/events/"]) == {"post"}
    sent = schema["paths"]["/api/events/"]["post"]
    assert {"200", "201", "400", "401", "403", "404", "409"} <= set(sent["responses"])
    assert "Idempotency-Key" in {parameter["name"] for parameter in sent["parameters"]}
