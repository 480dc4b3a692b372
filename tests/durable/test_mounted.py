"""durable mounted under a prefix, as a host project mounts it: every page, link, form and redirect stays under it."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from durable.roles import ROLES
from tests.conftest import user_with_roles
from tests.endpoints import build_world, page_routes

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.durable.mounted_urls")]

# Every address a page points at: links, forms, htmx requests, scripts and stylesheets.
ADDRESS = re.compile(r'(?:href|action|src|hx-get|hx-post|hx-delete|hx-put)="(/[^"]*)"')


@pytest.fixture(autouse=True)
def _host_login(settings):
    settings.LOGIN_URL = "durable:login"
    settings.LOGIN_REDIRECT_URL = "/host-home/"  # the host's own; the console's login does not use it


def test_every_route_is_under_the_prefix():
    assert all(route for route in page_routes())
    from django.urls import reverse

    assert reverse("durable:overview") == "/ops/"
    assert reverse("api:run-list") == "/ops/api/runs/"
    assert reverse("durable:login") == "/ops/accounts/login/"


def test_an_anonymous_visitor_goes_to_the_consoles_login_and_back_under_the_prefix(db):
    user_with_roles("ann", *ROLES, password="a-long-enough-password")
    anonymous = Client()
    response = anonymous.get("/ops/runs/")
    assert response.status_code == 302 and response["Location"] == "/ops/accounts/login/?next=/ops/runs/"
    page = anonymous.get(response["Location"])
    assert page.status_code == 200 and 'name="password"' in page.content.decode()
    logged_in = anonymous.post("/ops/accounts/login/", {"username": "ann", "password": "a-long-enough-password"})
    assert logged_in.status_code == 302 and logged_in["Location"] == "/ops/"  # no ?next=: the console, not the host


@pytest.mark.parametrize("guess, login", [
    ("/ops/login/", "/ops/accounts/login/"),
    ("/ops/login/?next=/ops/runs/", "/ops/accounts/login/?next=/ops/runs/"),
])
def test_the_guessed_login_address_under_the_prefix_leads_to_the_consoles_login(guess, login):
    response = Client().get(guess)
    assert response.status_code == 302 and response["Location"] == login
    assert Client().get(response["Location"]).status_code == 200


def test_every_console_page_points_only_under_the_prefix(sandbox):
    world = build_world(sandbox)
    client = Client()
    client.force_login(user_with_roles("ops", *ROLES))
    pointed = set()
    for route in page_routes():
        url = world.url(route.name, world.attention if "run" in route.kwargs else None)
        if route.name.endswith(("logout", "export")) or route.name.startswith("rest_framework:"):
            continue  # POST-only, a CSV file, DRF's own login
        response = client.get(url)
        if response.status_code == 405:
            continue  # a form's target, answering POST only
        assert response.status_code == 200, (route.name, url, response.status_code)
        pointed |= {address for address in ADDRESS.findall(response.content.decode()) if not address.startswith("/static/")}
    outside = sorted(address for address in pointed if not address.startswith("/ops/"))
    assert not outside, outside
    assert "/ops/api/" in pointed and any(a.startswith("/ops/reconciliation/") for a in pointed)


def test_an_unknown_api_address_under_the_prefix_answers_json():
    response = Client().get("/ops/api/nothing-here/")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
