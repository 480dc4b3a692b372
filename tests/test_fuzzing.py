"""Fuzzing the console as schemathesis fuzzes the API: no form, query or id in a URL can make a 5xx.

Hypothesis fills every console form (a POST with a valid CSRF token, as a logged-in admin) and the query
parameters of every page and API list with hostile text, numbers and JSON: NUL characters, lone surrogates,
NaN, Infinity, 1e999, numbers past every integer column, JSON nested thousands deep. Every answer is below
500, and a refusal writes nothing. Each example runs in a savepoint rolled back afterwards, so the world it
aims at is the same for every example. The route lists come from tests/endpoints.py's walk of the URLconf,
so a new form or page is fuzzed without being listed here.
"""
from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from approvals.api.serializers import ApprovalFilterSerializer
from approvals.forms import InboxFilters
from durable.api.filters import RunFilterSerializer
from durable.console.audit import AuditFilters
from durable.console.forms import RunsQuery
from durable.console.search import SearchQuery
from reconciliation.api.views import OperationFilterSerializer
from tests.endpoints import World, api_target, console_target, logged_in, routes, written
from tests.test_hostile_input import API_BODY_ENDPOINTS, CONSOLE_FORMS, LOGIN_FORMS, admin, world  # noqa: F401

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=20, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

# Strings a person, a script or an attacker might type, each once known to break some parser or column.
HOSTILE_STRINGS = [
    "", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\ufffd", "\u202e", "😀" * 3, "%00", "%ED%A0%80",
    "NaN", "-Infinity", "Infinity", "1e999", "-1e999", "1e-999", "-1", "0", "1.5", "2147483648",
    "9223372036854775808", "9" * 30, "9" * 5000, "0x10", "true", "null",
    '{"a": NaN}', '{"a": Infinity}', '{"a": 1e999}', '{"a": -1e999}', '{"a": ' + "9" * 5000 + "}",
    '{"a": "\\ud800"}', '{"a\\udc00": 1}', '{"a": "\\u0000"}', "[" * 5000, '{"a": ' + "[" * 5000 + "]" * 5000 + "}",
    "{", "[]", '"text"', "x" * 5000, "<script>alert(1)</script>", "' OR 1=1 --", "../../etc/passwd",
    "2024-13-45", "2024-01-01T25:61:00", "2024-01-01T00:00:00+99:00", "9999-12-31T23:59:59+00:00",
    "0001-01-01T00:00:00-23:59", "2024-01-01T00:00:00+00:00~" + "9" * 30, "~", "~~", "0" * 64, "f" * 32,
    "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff~x",
]


def _json_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True)  # NaN and Infinity written as Python writes them


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)
HOSTILE = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=40),
    st.integers().map(str),
    st.floats().map(lambda f: repr(f) if not math.isfinite(f) else str(f)),
    JSON_VALUES.map(_json_text),
)


def form_body(fields: dict[str, str], csrf: str) -> bytes:
    """A urlencoded body as a browser would send it; lone surrogates go as the bytes that would encode them,
    which is what a hostile client can send (Django decodes them as U+FFFD)."""
    pairs = {**fields, "csrfmiddlewaretoken": csrf}
    return "&".join(f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in pairs.items()).encode()


def query_string(params: dict[str, str]) -> str:
    return "&".join(f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in params.items())


def answered_in_a_savepoint(send) -> tuple[int, bool]:
    """(status, whether anything was written), the database put back as it was afterwards."""
    with transaction.atomic():
        before = written()
        response = send()
        changed = written() != before
        transaction.set_rollback(True)
    return response.status_code, changed


# The console's forms: every field a browser could post, and a few it would not.

FORM_FIELDS = {
    "durable:run-cancel": ["reason", "confirm"],
    "durable:run-retry": ["reason", "confirm"],
    "durable:run-resume": ["reason", "confirm"],
    "durable:run-migrate": ["reason", "confirm", "to_version"],
    "durable:run-budget": ["reason", "confirm", "tokens", "cost"],
    "durable:bulk-cancel": ["runs", "reason", "confirm"],
    "durable:bulk-retry": ["runs", "reason", "confirm"],
    "durable:run-pause": ["reason", "confirm"],
    "durable:run-fork": ["checkpoint", "version", "state", "reason", "confirm"],
    "durable:bulk-pause": ["runs", "reason", "confirm"],
    "durable:bulk-resume": ["runs", "reason", "confirm"],
    "durable:paused": ["workflow", "version", "reason", "confirm"],
    "durable:paused-resume": ["reason", "confirm"],
    "durable:schedule-new": ["name", "workflow", "cron", "time_zone", "input", "business_key_template", "overlap",
                             "catch_up", "catch_up_window", "paused"],
    "durable:schedule-edit": ["workflow", "cron", "time_zone", "input", "business_key_template", "overlap",
                              "catch_up", "catch_up_window", "paused"],
    "durable:schedule-pause": [],
    "durable:schedule-resume": [],
    "durable:schedule-delete": ["reason", "confirm"],
    "approvals:decide": ["verdict", "reason", "snapshot_hash"],
    "reconciliation:lookup": [],
    "reconciliation:resolve": ["outcome", "external_ref", "result", "follow_up", "reason"],
    "durable:tokens": ["name", "days", "owner"],
    "durable:token-revoke": ["reason"],
    "durable:preferences": ["time_zone", "from_browser"],
    "durable:notifications": ["events", "channels"],
    "durable:login": ["username", "password", "next", "time_zone"],
    "rest_framework:login": ["username", "password", "next"],
    "durable:logout": ["next"],
    "rest_framework:logout": ["next"],
}
EXTRA_FIELDS = ["id", "status", "version", "page_size"]


def test_every_console_form_is_fuzzed():
    assert set(FORM_FIELDS) == set(CONSOLE_FORMS), "add the new form's fields to FORM_FIELDS"


def hostile_form(valid: dict[str, str], names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    """Each field either its valid value or a hostile one, sometimes with a field the form does not have."""
    fields = {name: st.one_of(st.just(valid[name]), HOSTILE) if name in valid else HOSTILE for name in names}
    optional = {name: HOSTILE for name in EXTRA_FIELDS if name not in names}
    return st.fixed_dictionaries(fields, optional=optional)


@pytest.mark.parametrize("name", CONSOLE_FORMS)
def test_no_console_form_answers_5xx_or_half_writes_whatever_is_posted(world, admin, name):
    url, valid = console_target(name, world, admin.username)

    @FUZZ
    @given(form=hostile_form(valid, FORM_FIELDS[name]))
    def post(form: dict[str, str]) -> None:
        client = Client(enforce_csrf_checks=True)
        if name not in LOGIN_FORMS:
            client.force_login(admin)
        client.get("/accounts/login/")  # the CSRF cookie, as a browser that opened a form has it
        csrf = client.cookies["csrftoken"].value
        status, changed = answered_in_a_savepoint(lambda: client.post(
            url, form_body(form, csrf), content_type="application/x-www-form-urlencoded"))
        assert status < 500, (name, form)
        assert status < 400 or not changed, f"{name} answered {status} but wrote: {form}"

    post()


# Every GET: the console's pages, their filters and page markers; the API's lists and their filters.

def _names(form_or_serializer: Any) -> list[str]:
    fields = getattr(form_or_serializer, "base_fields", None) or form_or_serializer().fields
    return list(fields)


QUERY_PARAMETERS = {
    "durable:runs": _names(RunsQuery),
    "durable:search": _names(SearchQuery),  # the header's search box (a GET form)
    "approvals:inbox": _names(InboxFilters),
    "audit:trail": _names(AuditFilters),
    "audit:export": _names(AuditFilters),
    "api:run-list": [*_names(RunFilterSerializer), "cursor", "page_size"],
    "api:approval-list": [*_names(ApprovalFilterSerializer), "cursor", "page_size"],
    "api:operation-list": [*_names(OperationFilterSerializer), "cursor", "page_size"],
    "api:run-events": ["cursor", "page_size"],  # a run's mailbox
    "api:run-stream": ["last_event_id"],  # a run's stream (the world's run waits: it answers at once)
}
ANY_PAGE = ["next", "page", "format", "q", "after", "cursor"]  # what a page ignores must still be harmless


def get_routes() -> list[str]:
    """Every route that answers GET, except the schema (schemathesis reads it) and the auth token endpoint."""
    return [route.name for route in routes()
            if not route.is_api or "get" in route.api_methods]


def hostile_query(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({}, optional={name: HOSTILE for name in [*names, *ANY_PAGE]})


@pytest.mark.parametrize("name", get_routes())
def test_no_get_answers_5xx_whatever_its_query_says(world, admin, name):
    url = world.url(name)
    client = logged_in(admin)

    @FUZZ
    @given(params=hostile_query(QUERY_PARAMETERS.get(name, [])))
    def get(params: dict[str, str]) -> None:
        status, changed = answered_in_a_savepoint(lambda: client.get(f"{url}?{query_string(params)}"))
        assert status < 500, (name, params)
        assert not changed or name == "metrics", f"GET {name} wrote: {params}"

    get()


def test_every_page_with_filters_is_fuzzed_with_them():
    assert set(QUERY_PARAMETERS) <= set(get_routes())


# The API's JSON bodies (schemathesis fuzzes them from the schema; this also checks nothing is half-written):
# each field its valid value or any JSON a client could send, sometimes with a field the endpoint does not take.

ANY_JSON = st.one_of(JSON_VALUES, st.sampled_from(HOSTILE_STRINGS), st.lists(st.sampled_from(HOSTILE_STRINGS),
                                                                            max_size=2))
EXTRA_JSON_FIELDS = ["reason", "payload", "idempotency_key", "name", "status", "version", "dry_run"]


def hostile_json(valid: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    fields = {name: st.one_of(st.just(value), ANY_JSON) for name, value in valid.items()}
    return st.fixed_dictionaries(fields, optional={name: ANY_JSON for name in EXTRA_JSON_FIELDS if name not in valid})


@pytest.mark.parametrize("name", API_BODY_ENDPOINTS)
def test_no_api_body_answers_5xx_or_half_writes_whatever_its_json_says(world, admin, name):
    url, valid = api_target(name, world)
    api = Client(HTTP_AUTHORIZATION=f"Token {_token(admin)}")

    @FUZZ
    @given(body=hostile_json(valid))
    def post(body: dict[str, Any]) -> None:
        text = json.dumps(body, allow_nan=True)  # lone surrogates go as \ud800 escapes, NaN as NaN
        status, changed = answered_in_a_savepoint(lambda: api.post(url, text, content_type="application/json"))
        assert status < 500, (name, body)
        assert status < 400 or not changed, f"{name} answered {status} but wrote: {body}"

    post()


# Ids in URLs: a NUL, a number past every integer column, a malformed id is a 404 (or 405), never a query
# that fails.

HOSTILE_IDS = ["%00", "ab%00cd", "0" * 31 + "%00", "9" * 40, "-1", "%ED%A0%80", "%FF", "x" * 300, "..%2F",
               "00000000-0000-0000-0000-00000000000%00", "F" * 32, "a" * 33]


def aimed_urls(name: str, world: World) -> list[str]:
    """The route's URL with each id it captures replaced by each hostile id."""
    route = next(r for r in routes() if r.name == name)
    url = world.url(name)
    values = {"run_id": str(world.waiting.id), "request_id": str(world.approval.id), "pk": None,
              "operation_id": world.operation.operation_id, "seq": "0", "token_id": str(world.token.id),
              "switch_id": str(world.switch.id if world.switch else 0)}
    segments = url.split("/")
    aimed = []
    for index, segment in enumerate(segments):
        if segment and (segment in values.values() or segment in (str(world.approval.id),
                                                                  world.operation.operation_id)
                        or world.schedule is not None and segment == str(world.schedule.id)):
            aimed.extend("/".join([*segments[:index], hostile, *segments[index + 1:]]) for hostile in HOSTILE_IDS)
    assert aimed or not route.kwargs, f"{name}: no id found in {url}"
    return aimed


@pytest.mark.parametrize("name", [route.name for route in routes() if route.kwargs])
def test_a_hostile_id_in_a_url_is_a_404_never_a_5xx(world, admin, name):
    api = Client(HTTP_AUTHORIZATION=f"Token {_token(admin)}")
    client = api if name.startswith("api:") else logged_in(admin)
    wrong = []
    for url in aimed_urls(name, world):
        for method in ("get", "post"):
            status, changed = answered_in_a_savepoint(lambda method=method, url=url: getattr(client, method)(url))
            if status not in (404, 405) or changed:
                wrong.append(f"{method.upper()} {url}: {status}{' and wrote' if changed else ''}")
    assert wrong == []


def _token(user) -> str:
    from tests.conftest import api_token

    return api_token(user)
