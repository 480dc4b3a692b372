"""The API tokens page: the token is shown on the answer that made it and never again; a user sees and revokes
their own tokens; a holder of durable.manage_apitoken those of everyone."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from durable.models import ApiToken, OperatorAction
from durable.roles import ADMIN
from tests.conftest import api_token, make_user, user_with_roles
from tests.endpoints import logged_in

pytestmark = pytest.mark.django_db
PAGE = "/tokens/"


def works(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/runs/").status_code


def test_the_page_shows_the_new_token_once_and_then_only_its_prefix():
    user = make_user("dana", "durable.view_run")
    browser = logged_in(user)
    made = browser.post(PAGE, {"name": "nightly export", "days": "30"})
    assert made.status_code == 201 and made["Cache-Control"].startswith("max-age=0")
    token = re.search(r'<pre class="new-token-secret">([^<]+)</pre>', made.content.decode()).group(1)
    assert works(token) == 200
    row = ApiToken.objects.get(user=user)
    assert row.name == "nightly export" and token.startswith(row.prefix)
    again = browser.get(PAGE).content.decode()
    assert row.prefix in again and "nightly export" in again
    assert token not in again and token[len(row.prefix):] not in again and row.secret_hash not in again
    assert OperatorAction.objects.filter(action="create_api_token", actor=user, source="console").exists()


def test_a_user_sees_only_their_own_tokens_and_cannot_revoke_anothers():
    mine, theirs = make_user("dana"), make_user("eve", "durable.view_run")
    api_token(mine, name="dana's script")
    their_token = api_token(theirs, name="eve's script")
    row = ApiToken.objects.get(user=theirs)
    browser = logged_in(mine)
    page = browser.get(PAGE).content.decode()
    assert "dana&#x27;s script" in page and "eve&#x27;s script" not in page
    assert browser.post(reverse("durable:token-revoke", args=[row.id]), {}).status_code == 403
    assert browser.post(PAGE, {"name": "for eve", "owner": "eve"}).status_code == 403
    assert ApiToken.objects.get(id=row.id).revoked_at is None and works(their_token) == 200


def test_a_user_revokes_their_own_token_and_it_stops_working_at_once():
    user = make_user("dana", "durable.view_run")
    token = api_token(user)
    row = ApiToken.objects.get(user=user)
    browser = logged_in(user)
    response = browser.post(reverse("durable:token-revoke", args=[row.id]), {"reason": "laptop lost"})
    assert response.status_code == 302
    assert works(token) == 401
    assert OperatorAction.objects.get(action="revoke_api_token").reason == "laptop lost"
    again = browser.post(reverse("durable:token-revoke", args=[row.id]), {})
    assert again.status_code == 409 and f"API token {row.prefix}… was already revoked" in again.content.decode()


def test_a_manager_sees_everyones_tokens_makes_one_for_a_service_and_revokes_any():
    service = make_user("intake", "durable.view_run")
    old = api_token(service, name="old intake")
    manager = user_with_roles("ann", ADMIN)
    browser = logged_in(manager)
    assert "old intake" in browser.get(PAGE).content.decode()
    made = browser.post(PAGE, {"name": "new intake", "owner": "intake"})
    assert made.status_code == 201 and ApiToken.objects.filter(user=service, name="new intake").exists()
    browser.post(reverse("durable:token-revoke", args=[ApiToken.objects.get(name="old intake").id]), {})
    assert works(old) == 401


def test_the_page_needs_a_login():
    response = logged_in(make_user("dana")).get(PAGE)
    assert response.status_code == 200
    from django.test import Client

    anonymous = Client().get(PAGE)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
