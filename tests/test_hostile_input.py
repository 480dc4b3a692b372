"""Hostile input: every API endpoint and console form refuses malformed, oversized or absurdly nested input
with a clear 400 that names the problem, writes nothing, and never answers 500; every console form needs
its CSRF token.

The case lists below are checked against the URLconf (tests/endpoints.py walks it): a new endpoint that
takes a body, or a new page that takes a POST, fails test_every_*_is_covered until it is added here.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from durable.engine.json_values import MAX_JSON_DEPTH
from durable.models import Run
from durable.roles import ADMIN
from tests.audit import operator_actions
from tests.conftest import ALL_RUN_PERMS, api_token, make_user, user_with_roles
from tests.durable import version_workflows as vw
from tests.endpoints import (
    START,
    World,
    api_routes,
    api_target,
    build_world,
    console_target,
    logged_in,
    page_routes,
    written,
)

pytestmark = pytest.mark.django_db

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
NAMES_THE_LIMIT = f"{LIMIT:,} bytes"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def world(sandbox, settings) -> World:
    # The deterministic planner, with the usual HTTP timeout rather than demo's 0.3 s, which a
    # busy CI machine can outlast before the runs this world needs have reached their states.
    settings.DURABLE_LLM_BASE_URL = ""
    return build_world(sandbox)


@pytest.fixture
def admin(db):
    return user_with_roles("olga", ADMIN)


@pytest.fixture
def api(admin) -> Client:
    """An API client as the integrations send: a token, so no CSRF token is needed."""
    return Client(HTTP_AUTHORIZATION=f"Token {api_token(admin)}")


# The API: every endpoint that takes a body

API_BODY_ENDPOINTS = [
    "api:run-list", "api:run-cancel", "api:run-retry", "api:run-resume", "api:run-migrate", "api:run-migrate-blocked",
    "api:run-bulk", "api:approval-approve", "api:approval-reject", "api:operation-resolve", "api:run-events",
    "api:event-list", "api:run-budget", "api:run-pause", "api:pause-switch-list", "api:pause-switch-resume",
    "api:run-fork", "api:schedule-list", "api:schedule-edit", "api:schedule-delete",
]


# A value of the wrong type for each field of each body.
WRONG_TYPES: dict[str, list[tuple[str, Any]]] = {
    "api:run-list": [("workflow", ["claims-agent"]), ("input", ["ORD-1002"]), ("business_key", {"id": 1}),
                     ("version", "two"), ("idempotency_key", ["k"])],
    "api:run-cancel": [("reason", ["checked"])],
    "api:run-retry": [("reason", {"why": "checked"})],
    "api:run-resume": [("reason", True)],
    "api:run-pause": [("reason", ["bad prompt"])],
    "api:run-fork": [("checkpoint", "zero"), ("checkpoint", -1), ("version", "two"), ("state", ["not", "an object"]),
                     ("reason", ["prompt fixed"])],
    "api:pause-switch-list": [("workflow", [vw.NAME]), ("version", "two"), ("reason", {"why": "r"})],
    "api:pause-switch-resume": [("reason", ["v4"])],
    "api:run-migrate": [("to_version", "two"), ("reason", ["checked"])],
    "api:run-budget": [("tokens", "many"), ("tokens", 1.5), ("cost", ["1"]), ("cost", "NaN"), ("cost", "1e999"),
                       ("reason", ["checked"])],
    "api:run-migrate-blocked": [("workflow", [vw.NAME]), ("from_version", "one"), ("to_version", 2.5),
                                ("reason", {"why": "r"})],
    "api:run-bulk": [("action", ["cancel"]), ("reason", {"why": "r"}), ("run_ids", "not a list"),
                     ("filter", ["FAILED"]), ("dry_run", "perhaps")],
    "api:approval-approve": [("snapshot_hash", 12345), ("reason", ["fine"])],
    "api:approval-reject": [("snapshot_hash", ["0" * 64]), ("reason", {"why": "no"})],
    "api:operation-resolve": [("outcome", 1), ("external_ref", {"ref": 1}), ("result", ["ntf-1"]),
                              ("follow_up", True), ("reason", ["checked"])],
    "api:run-events": [("name", ["reply"]), ("idempotency_key", ["k"])],  # a payload may be any JSON
    "api:event-list": [("workflow", ["claims-agent"]), ("business_key", {"id": 1}), ("name", {"n": 1}),
                       ("idempotency_key", {"key": 1})],
    "api:schedule-list": [("name", ["n"]), ("cron", {"m": 1}), ("time_zone", ["UTC"]), ("catch_up_window", "long"),
                          ("paused", "perhaps"), ("overlap", ["skip"])],
    "api:schedule-edit": [("cron", ["* * * * *"]), ("time_zone", {"tz": 1}), ("catch_up", 3), ("paused", "perhaps")],
    "api:schedule-delete": [("reason", ["gone"])],
}

# The text fields of each body: a NUL character in any of them is refused (Postgres cannot store one).
TEXT_FIELDS: dict[str, list[str]] = {
    "api:run-list": ["workflow", "business_key", "idempotency_key", "input"],
    "api:run-cancel": ["reason"], "api:run-retry": ["reason"], "api:run-resume": ["reason"],
    "api:run-pause": ["reason"], "api:pause-switch-list": ["workflow", "reason"], "api:pause-switch-resume": ["reason"],
    "api:run-fork": ["reason", "state"],
    "api:run-migrate": ["reason"], "api:run-migrate-blocked": ["workflow", "reason"], "api:run-budget": ["reason"],
    "api:run-bulk": ["reason"],
    "api:approval-approve": ["reason"], "api:approval-reject": ["reason"],
    "api:operation-resolve": ["external_ref", "reason", "result"],
    "api:run-events": ["name", "payload", "idempotency_key"],
    "api:event-list": ["workflow", "business_key", "name", "payload", "idempotency_key"],
    "api:schedule-list": ["name", "workflow", "cron", "time_zone", "business_key_template", "input"],
    "api:schedule-edit": ["cron", "time_zone", "business_key_template", "input"],
    "api:schedule-delete": ["reason"],
}

MALFORMED_JSON = [b"{", b"[1,2", b'{"reason": "checked",}', b"{'reason': 'single quotes'}", b"NaN"]
NOT_AN_OBJECT = [b"[]", b'"checked"', b"5", b"true", b"null"]
NOT_UTF8 = [b"\xff\xfe{}", b'{"reason": "\xc3\x28"}', b'{"reason": "\xed\xa0\x80"}']


def post_json(client: Client, url: str, body: bytes | dict[str, Any], content_type: str = "application/json"):
    return client.post(url, body if isinstance(body, bytes) else json.dumps(body), content_type=content_type)


def refusal(response, *names: str) -> str:
    """'' when the answer is a JSON 400 naming each of `names` (fields, or words of its detail); else what it was."""
    if response.status_code != 400 or response.get("Content-Type") != "application/json":
        return f"{response.status_code} {response.get('Content-Type')}: {response.content[:200]!r}"
    body = response.json()
    text = json.dumps(body)
    missing = [name for name in names if name not in body and name not in text]
    return f"400 without {missing}: {text[:300]}" if missing else ""


# The fields that take any JSON value (an object here): bounded in depth, storable, refused naming the field.
JSON_FIELDS = [("api:run-list", "input"), ("api:operation-resolve", "result"), ("api:run-events", "payload"),
               ("api:event-list", "payload"), ("api:run-fork", "state")]


def test_every_api_endpoint_that_takes_a_body_is_covered():
    takes_a_body = {route.name for route in api_routes() if route.api_methods & {"post", "put", "patch"}}
    assert takes_a_body == set(API_BODY_ENDPOINTS), "add the new endpoint to API_BODY_ENDPOINTS and WRONG_TYPES"
    assert set(WRONG_TYPES) == set(TEXT_FIELDS) == set(API_BODY_ENDPOINTS)


def refusals(api, url: str, bodies, *expected: str) -> list[str]:
    """The bodies not refused with a 400 that names each of `expected`, with what was wrong."""
    return [f"{body!r}: {problem}" for body in bodies
            if (problem := refusal(post_json(api, url, body), *expected))]


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_malformed_json_is_a_400_naming_the_parse_error_and_writes_nothing(world, api, endpoint):
    url, _ = api_target(endpoint, world)
    before = written()
    # a raw NUL byte is a control character in JSON
    assert refusals(api, url, MALFORMED_JSON + [b'{"reason": "a\x00b"}'], "JSON parse error") == []
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_bytes_that_are_not_utf8_are_a_400_naming_the_encoding_and_write_nothing(world, api, endpoint):
    url, _ = api_target(endpoint, world)
    before = written()
    assert refusals(api, url, NOT_UTF8, "JSON parse error", "utf-8") == []
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_a_body_that_is_not_a_json_object_is_a_400_and_writes_nothing(world, api, endpoint):
    url, _ = api_target(endpoint, world)
    before = written()
    assert refusals(api, url, NOT_AN_OBJECT, "non_field_errors") == []
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_json_nested_past_pythons_recursion_limit_is_a_400_not_a_500(world, api, endpoint):
    url, body = api_target(endpoint, world)
    before = written()
    for hostile in (nested(100_000), json.dumps({**body, "extra": "@"}).replace('"@"', nested(100_000))):
        assert refusal(post_json(api, url, hostile.encode()), "nested too deeply", str(MAX_JSON_DEPTH)) == ""
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_a_body_over_the_upload_limit_is_a_400_naming_the_limit_and_writes_nothing(world, api, endpoint):
    url, body = api_target(endpoint, world)
    before = written()
    oversized = json.dumps({**body, "reason": "x" * LIMIT})
    assert refusal(post_json(api, url, oversized.encode()), NAMES_THE_LIMIT, "DATA_UPLOAD_MAX_MEMORY_SIZE") == ""
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_a_body_in_a_media_type_the_api_does_not_read_is_a_415(world, api, endpoint):
    url, body = api_target(endpoint, world)
    before = written()
    response = post_json(api, url, json.dumps(body).encode(), content_type="text/plain")
    assert response.status_code == 415 and "text/plain" in response.json()["detail"]
    assert written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_a_field_of_the_wrong_type_is_a_400_naming_the_field_and_writes_nothing(world, api, endpoint):
    url, body = api_target(endpoint, world)
    before, wrong = written(), []
    for field, value in WRONG_TYPES[endpoint]:
        if problem := refusal(post_json(api, url, {**body, field: value}), field):
            wrong.append(f"{field}={value!r}: {problem}")
    assert wrong == [] and written() == before


@pytest.mark.parametrize("endpoint", API_BODY_ENDPOINTS)
def test_a_nul_character_in_any_text_field_is_a_400_naming_the_field_and_writes_nothing(world, api, endpoint):
    url, body = api_target(endpoint, world)
    before, wrong = written(), []
    for field in TEXT_FIELDS[endpoint]:
        value = {"text": "a\x00b"} if field in ("input", "result", "payload", "state") else "a\x00b"
        if problem := refusal(post_json(api, url, {**body, field: value}), field):
            wrong.append(f"{field}: {problem}")
    assert wrong == [] and written() == before


@pytest.mark.parametrize("endpoint,field", JSON_FIELDS)
def test_a_json_field_nested_deeper_than_the_limit_is_a_400_naming_the_field(world, api, endpoint, field):
    url, body = api_target(endpoint, world)
    before = written()
    for depth in (MAX_JSON_DEPTH, 500):  # the object holding a list nested `depth` deep is one level more
        deep = {**body[field], "deep": json.loads(nested(depth))}
        assert refusal(post_json(api, url, {**body, field: deep}), field, f"more than {MAX_JSON_DEPTH} levels") == ""
    assert written() == before


# What Python's json reads but no database stores: an overflowing number and a lone surrogate escape.
UNSTORABLE_JSON = [("1e999", "finite numbers only"), ("-1e999", "finite numbers only"),
                   ('"\\ud800"', "lone surrogate"), ('"a\\udfffb"', "lone surrogate")]


@pytest.mark.parametrize("endpoint,field", JSON_FIELDS)
@pytest.mark.parametrize("value,says", UNSTORABLE_JSON)
def test_a_json_field_holding_what_no_database_stores_is_a_400_naming_it(world, api, endpoint, field, value, says):
    url, body = api_target(endpoint, world)
    before = written()
    text = json.dumps({**body, field: {**body[field], "x": "@"}}).replace('"@"', value)
    assert refusal(post_json(api, url, text.encode()), field, says) == ""
    form_encoded = api.post(url, {**body, field: json.dumps({"x": "@"}).replace('"@"', value)})
    assert refusal(form_encoded, field, says) == ""
    assert written() == before


def test_a_run_input_nested_exactly_to_the_limit_is_accepted(world, api):
    deep = {**START["input"], "deep": json.loads(nested(MAX_JSON_DEPTH - 1))}
    response = post_json(api, reverse("api:run-list"), {**START, "input": deep})
    assert response.status_code == 201, response.content[:300]


def test_a_form_encoded_json_field_nested_past_the_recursion_limit_is_a_400_naming_it(world, api):
    before = written()
    response = api.post(reverse("api:run-list"), {**START, "input": nested(100_000)})
    assert refusal(response, "input", f"more than {MAX_JSON_DEPTH} levels") == ""
    assert written() == before


def test_a_run_input_is_bounded_by_the_body_limit_and_by_its_workflows_input_model(world, api):
    """No API-wide cap on `input` beyond the body limit; each workflow's input model caps its own fields."""
    runs = reverse("api:run-list")
    too_long = {**START["input"], "customer_message": "m" * 4001}  # the claims-agent's cap is 4,000
    assert refusal(post_json(api, runs, {**START, "input": too_long}), "input", "customer_message") == ""
    uncapped = {"workflow": vw.NAME, "version": 1, "reason": "big input", "business_key": "big",
                "input": {"order_id": ""}}
    order_id = "o" * (LIMIT - len(json.dumps(uncapped)))  # the body is exactly the limit
    older = APIClient()  # v1 of the test workflow takes an uncapped input; starting it needs its permission
    older.force_authenticate(make_user("older-starter", *ALL_RUN_PERMS, "durable.start_older_version"))
    response = post_json(older, runs, {**uncapped, "input": {"order_id": order_id}})
    assert response.status_code == 201, response.content[:300]
    assert Run.objects.get(id=response.json()["id"]).input["order_id"] == order_id


def test_an_api_call_authenticated_by_the_session_needs_the_csrf_token(world, admin):
    """The browsable API logs in with a session; its POSTs are CSRF-checked like the console's (a token is not)."""
    browser = logged_in(admin, enforce_csrf_checks=True)
    before, wrong = written(), []
    for endpoint in API_BODY_ENDPOINTS:
        url, body = api_target(endpoint, world)
        response = post_json(browser, url, body)
        if response.status_code != 403 or "CSRF" not in response.json()["detail"]:
            wrong.append(f"{endpoint}: {response.status_code}")
    assert wrong == [] and written() == before


# The console: every page that takes a POST

CONSOLE_FORMS = [
    "durable:run-cancel", "durable:run-retry", "durable:run-resume", "durable:run-migrate", "durable:run-budget",
    "durable:bulk-cancel", "durable:bulk-retry", "approvals:decide",
    "durable:run-pause", "durable:bulk-pause", "durable:bulk-resume", "durable:paused", "durable:paused-resume",
    "durable:run-fork",
    "reconciliation:lookup", "reconciliation:resolve", "durable:tokens", "durable:token-revoke", "durable:preferences",
    "durable:login", "durable:logout",
    "durable:notifications",
    "durable:schedule-new", "durable:schedule-edit", "durable:schedule-pause", "durable:schedule-resume",
    "durable:schedule-delete",
    "rest_framework:login", "rest_framework:logout",
]
LOGIN_FORMS = ("durable:login", "rest_framework:login")


def browser(name: str, admin) -> Client:
    """A browser with its CSRF cookie, as a person who opened the page: logged in, except on a login form."""
    client = Client(enforce_csrf_checks=True)
    if name not in LOGIN_FORMS:
        client.force_login(admin)
    client.get(reverse("durable:login"))  # any page with a form sets the CSRF cookie
    return client


def is_logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_every_console_form_is_covered(world, admin):
    """What takes a POST is asked of the app itself: anything but 405 to a logged-in admin's empty POST."""
    takes_posts = {route.name for route in page_routes()
                   if logged_in(admin).post(world.url(route.name)).status_code != 405}
    assert takes_posts == set(CONSOLE_FORMS), "add the new form to CONSOLE_FORMS and console_target"


@pytest.mark.parametrize("name", CONSOLE_FORMS)
def test_a_console_post_without_its_csrf_token_is_refused_and_writes_nothing(world, admin, name):
    url, form = console_target(name, world, admin.username)
    client = browser(name, admin)
    session_before, before = is_logged_in(client), written()
    refused = client.post(url, form)
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert written() == before and is_logged_in(client) == session_before
    # The same post with the token gets through: the token, nothing else, was missing.
    accepted = client.post(url, {**form, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert accepted.status_code != 403


@pytest.mark.parametrize("name", CONSOLE_FORMS)
def test_an_oversized_console_post_is_a_400_page_naming_the_limit_and_writes_nothing(world, admin, name):
    url, form = console_target(name, world, admin.username)
    client = browser(name, admin)
    session_before, before = is_logged_in(client), written()
    body = urlencode({**form, "csrfmiddlewaretoken": client.cookies["csrftoken"].value, "reason": "x" * LIMIT})
    response = client.post(url, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    page = response.content.decode()
    assert NAMES_THE_LIMIT in page and "DATA_UPLOAD_MAX_MEMORY_SIZE" in page and "Nothing was done" in page
    assert written() == before and is_logged_in(client) == session_before


@pytest.mark.parametrize("name", CONSOLE_FORMS)
def test_a_console_post_with_too_many_fields_is_a_400_page_naming_the_limit(world, admin, name):
    url, form = console_target(name, world, admin.username)
    client = browser(name, admin)
    session_before, before = is_logged_in(client), written()
    padding = {f"field{i}": "x" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)}
    response = client.post(url, {**form, **padding, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert response.status_code == 400
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in response.content.decode()
    assert written() == before and is_logged_in(client) == session_before


RUN_ACTIONS = ["durable:run-cancel", "durable:run-retry", "durable:run-resume", "durable:run-migrate",
               "durable:run-budget"]
# (form, fields replaced, what the 400 page says)
MALFORMED_FORMS = [
    *((action, {"reason": "a\x00b"}, "Null characters are not allowed") for action in RUN_ACTIONS),
    ("durable:run-migrate", {"to_version": "two"}, "Select a valid choice"),
    ("durable:run-migrate", {"to_version": "99"}, "Select a valid choice"),
    ("durable:run-budget", {"tokens": "many"}, "Enter a whole number"),
    ("durable:run-budget", {"tokens": "9" * 30}, "Ensure this value is less than or equal to"),
    ("durable:run-budget", {"cost": "NaN"}, "Enter a number"),
    ("durable:run-budget", {"cost": "1e999"}, "Ensure that there are no more than"),
    ("durable:run-budget", {"tokens": "300"}, "above the run&#x27;s token budget"),
    ("approvals:decide", {"verdict": "maybe"}, "Select a valid choice"),
    ("approvals:decide", {"snapshot_hash": "<script>"}, "the page did not say which snapshot you saw"),
    ("approvals:decide", {"reason": "a\x00b"}, "Null characters are not allowed"),
    ("durable:tokens", {"name": "a\x00b"}, "Null characters are not allowed"),
    ("durable:tokens", {"name": "x" * 101}, "at most 100 characters"),
    ("durable:tokens", {"days": "soon"}, "Enter a whole number"),
    ("durable:tokens", {"days": "0"}, "greater than or equal to 1"),
    ("durable:tokens", {"owner": "nobody-at-all"}, "no user is called"),
    ("durable:token-revoke", {"reason": "a\x00b"}, "Null characters are not allowed"),
    ("durable:preferences", {"time_zone": "Mars/Olympus_Mons"}, "is not a time zone this server knows"),
    ("durable:preferences", {"time_zone": "a\x00b"}, "Null characters are not allowed"),
    ("durable:preferences", {"time_zone": "x" * 65}, "at most 64 characters"),
    *((form, {field: "a\x00b"}, "Null characters are not allowed")
      for form in ("durable:schedule-new", "durable:schedule-edit")
      for field in ("cron", "time_zone", "business_key_template")),
    ("durable:schedule-new", {"name": "a\x00b"}, "Null characters are not allowed"),
    ("durable:schedule-new", {"name": "x" * 101}, "at most 100 characters"),
    ("durable:schedule-new", {"cron": "x" * 201}, "at most 200 characters"),
    ("durable:schedule-new", {"time_zone": "x" * 65}, "at most 64 characters"),
    ("durable:schedule-new", {"time_zone": "../../etc/passwd"}, "is not a time zone"),
    ("durable:schedule-new", {"cron": "<script>alert(1)</script>"}, "is not a cron expression"),
    ("durable:schedule-new", {"workflow": "<script>"}, "Select a valid choice"),
    ("durable:schedule-new", {"catch_up_window": "9" * 30}, "Ensure this value is less than or equal to"),
    ("durable:schedule-new", {"business_key_template": "{fire_time.__class__}"}, "is not a field"),
    ("durable:schedule-edit", {"input": '{"n": "a\\u0000b"}'}, "must not contain NUL"),
    ("durable:schedule-edit", {"input": '{"deep": ' + nested(500) + "}"}, f"more than {MAX_JSON_DEPTH} levels"),
    ("durable:schedule-edit", {"input": '{"n": NaN}'}, "finite numbers only"),
    ("durable:schedule-edit", {"input": '{"n": "\\ud800"}'}, "lone surrogate"),
    ("durable:schedule-delete", {"reason": "a\x00b"}, "Null characters are not allowed"),
    ("durable:schedule-delete", {"confirm": ""}, "to go ahead"),
    ("reconciliation:resolve", {"outcome": "perhaps"}, "Select a valid choice"),
    ("reconciliation:resolve", {"external_ref": "a\x00b"}, "Null characters are not allowed"),
    ("reconciliation:resolve", {"external_ref": "x" * 201}, "at most 200 characters"),
    ("reconciliation:resolve", {"result": "{nope"}, "not valid JSON"),
    ("reconciliation:resolve", {"result": '{"ref": "a\\u0000b"}'}, "must not contain NUL"),
    ("reconciliation:resolve", {"result": '{"deep": ' + nested(500) + "}"}, f"more than {MAX_JSON_DEPTH} levels"),
    ("reconciliation:resolve", {"result": nested(100_000)}, f"more than {MAX_JSON_DEPTH} levels"),
    *(("reconciliation:resolve", {"result": f'{{"amount": {number}}}'}, "finite numbers only")
      for number in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999")),
    ("reconciliation:resolve", {"result": '{"ref": "\\ud800"}'}, "lone surrogate"),
    ("reconciliation:resolve", {"result": '{"\\udc00": 1}'}, "lone surrogate"),
    ("reconciliation:resolve", {"result": '{"amount": ' + "9" * 5000 + "}"}, "not valid JSON"),
]


@pytest.mark.parametrize("name,fields,says", MALFORMED_FORMS,
                         ids=[f"{name}-{next(iter(fields))}-{i}" for i, (name, fields, _) in enumerate(MALFORMED_FORMS)])
def test_a_malformed_console_form_is_a_400_saying_what_is_wrong_and_writes_nothing(world, admin, name, fields, says):
    url, form = console_target(name, world, admin.username)
    before = written()
    response = logged_in(admin).post(url, {**form, **fields})
    assert response.status_code == 400 and says in response.content.decode()
    assert written() == before


@pytest.mark.parametrize("name", ["durable:run-cancel", "durable:run-migrate", "approvals:decide",
                                  "reconciliation:resolve", "durable:schedule-new", "durable:schedule-edit"])
def test_json_posted_to_a_console_form_is_a_400_and_writes_nothing(world, admin, name):
    url, form = console_target(name, world, admin.username)
    before = written()
    response = logged_in(admin).post(url, json.dumps(form), content_type="application/json")
    assert response.status_code == 400 and "Nothing was" in response.content.decode()
    assert written() == before


@pytest.mark.parametrize("path", ["/reconciliation/%00/", "/reconciliation/ab%00cd/resolve/",
                                  "/reconciliation/" + "0" * 31 + "%00/lookup/", "/api/operations/%00/",
                                  "/runs/00000000-0000-0000-0000-000000000000/checkpoints/" + "9" * 30 + "/"])
def test_an_id_in_a_url_with_a_nul_or_out_of_range_is_a_404(world, admin, path):
    assert logged_in(admin).get(path).status_code == 404


def test_a_reason_in_bytes_that_are_not_utf8_is_read_with_replacement_characters(world, admin):
    """Django decodes form bytes that are not UTF-8 as U+FFFD: the reason is stored as readable text, never a 500."""
    url, _ = console_target("durable:run-cancel", world, admin.username)
    response = logged_in(admin).post(url, b"reason=refund%FF%FE&confirm=on",
                                     content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302
    assert operator_actions().get(run=world.waiting).reason == "refund\ufffd\ufffd"


@pytest.mark.parametrize("name", LOGIN_FORMS)
def test_a_malformed_login_shows_the_form_with_its_errors_and_logs_no_one_in(world, admin, name):
    """As with a wrong password, Django's login form answers 200 with its errors (and counts a failed attempt)."""
    url, _ = console_target(name, world, admin.username)
    for form, says in (({"username": "a\x00b", "password": "x"}, "Null characters are not allowed"),
                       ({"username": "x" * 5000, "password": "x"}, "Please enter a correct username and password"),
                       ({}, "This field is required")):
        client = Client()
        response = client.post(url, form)
        assert response.status_code == 200 and says in response.content.decode()
        assert not is_logged_in(client)
