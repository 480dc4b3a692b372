"""Every cursor of every list: a cursor the API did not give (undecodable, a position its column cannot hold, an
offset or direction out of range) is the same 400 naming `cursor` at every paginated endpoint, never a 500 or a
404 (durable/api/pagination.py).

The paginated endpoints are found from the URLconf (tests/endpoints.py): each API route answering GET whose
answer is a page (`next`, `previous`, `results`), so a new list is fuzzed without being listed here."""
from __future__ import annotations

import base64
from urllib.parse import quote

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable.api.pagination import INVALID_CURSOR
from tests.conftest import api_token, user_with_roles
from tests.endpoints import World, api_routes, build_world

pytestmark = pytest.mark.django_db
FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def encoded(querystring: str) -> str:
    """A cursor as DRF writes one: base64 of a querystring (r: reverse, o: offset, p: position)."""
    return base64.b64encode(querystring.encode("utf-8", "surrogatepass")).decode("ascii")


HOSTILE_POSITIONS = ["abc", "1e999", "-1e999", "1.5", "NaN", "Infinity", "9" * 30, "9223372036854775808",
                     "-9223372036854775809", "\x00", "0x10", "2024-13-45", "2024-01-01T25:61:00", " ", "😀",
                     "00000000-0000-0000-0000-000000000000~", "' OR 1=1 --", "x" * 5000]
HOSTILE_CURSORS = [
    *(encoded(f"p={quote(text)}") for text in HOSTILE_POSITIONS),
    encoded("r=1&p=x"), encoded("r=x"), encoded("o=-1"), encoded("o=x"), encoded("o=1e999"),
    encoded("o=1.5"), encoded("p=abc&p=1"), "cD1hYmM=", "%00", "cD0", "😀", "x" * 5000,
]  # (DRF reads a cursor's first `p`, caps its offset and ignores what is not base64: those are pages, not errors)




@pytest.fixture
def world(sandbox, settings) -> World:
    settings.DURABLE_LLM_BASE_URL = ""  # the deterministic planner
    return build_world(sandbox)


@pytest.fixture
def api(world) -> Client:
    admin = user_with_roles("olga", "admin")
    return Client(HTTP_AUTHORIZATION=f"Token {api_token(admin)}")


def paginated(api: Client, world: World) -> list[str]:
    """The URL of every API list that answers in cursor pages."""
    urls = []
    for route in api_routes():
        if "get" not in route.api_methods:
            continue
        url = world.url(route.name)
        answer = api.get(url)
        if answer.status_code == 200 and answer.get("Content-Type", "").startswith("application/json"):
            body = answer.json()
            if isinstance(body, dict) and {"next", "previous", "results"} <= set(body):
                urls.append(url)
    return urls


BAD_CURSOR = {"cursor": [f"Cursor: {INVALID_CURSOR}"]}  # the field's label leads its message, as at every 400


def assert_refused_as_a_bad_cursor(answer, url: str, cursor: str) -> None:
    assert answer.status_code == 400, f"{url}?cursor={cursor[:60]!r}: {answer.status_code} {answer.content[:200]!r}"
    assert answer.json() == BAD_CURSOR, f"{url}: {answer.json()}"


def test_the_paginated_lists_are_found(api, world):
    found = {url.split("/")[2] if url.count("/") <= 4 else url.rstrip("/").rsplit("/", 1)[-1]
             for url in paginated(api, world)}
    assert {"runs", "events", "approvals", "operations"} <= found, found


def test_every_hostile_cursor_is_the_same_400_at_every_list(api, world):
    wrong = []
    for url in paginated(api, world):
        for cursor in HOSTILE_CURSORS:
            answer = api.get(f"{url}?cursor={quote(cursor)}")
            if answer.status_code != 400 or answer.json() != BAD_CURSOR:
                wrong.append(f"{url}?cursor={cursor[:40]!r}: {answer.status_code} {answer.content[:120]!r}")
    assert not wrong, "\n".join(wrong)


def test_the_runs_list_in_each_order_refuses_a_hostile_position(api, world):
    url = world.url("api:run-list")
    for order in ("newest", "cost", "tokens"):
        for text in HOSTILE_POSITIONS:
            if (order, text) == ("cost", "1.5"):  # an amount, where the runs are ordered by cost
                continue
            cursor = encoded(f"p={quote(text)}")
            assert_refused_as_a_bad_cursor(api.get(f"{url}?order={order}&cursor={quote(cursor)}"), url, cursor)


def test_a_cursor_the_api_gave_still_pages(api, world):
    for url in paginated(api, world):
        first = api.get(f"{url}?page_size=1" if "operations" not in url else url).json()
        if first["next"]:
            assert api.get(first["next"]).status_code == 200, first["next"]


@FUZZ
@given(querystring=st.text(max_size=60), raw=st.text(max_size=60))
def test_any_cursor_at_any_list_is_a_page_or_a_400(api, world, querystring, raw):
    for url in paginated_once(api, world):
        for cursor in (encoded(querystring), raw):
            with transaction.atomic():
                answer = api.get(f"{url}?cursor={quote(cursor)}")
                transaction.set_rollback(True)
            assert answer.status_code in (200, 400), f"{url}?cursor={cursor!r}: {answer.status_code}"
            if answer.status_code == 400:
                assert answer.json() == BAD_CURSOR


_FOUND: dict[int, list[str]] = {}


def paginated_once(api: Client, world: World) -> list[str]:
    """paginated(), walked once per world (hypothesis calls the test many times with the same fixtures)."""
    return _FOUND.setdefault(id(world), paginated(api, world))
