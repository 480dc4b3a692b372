"""No answer a signed-in user gets is kept by a browser or a proxy cache: every route says `no-store`."""
import pytest
from django.contrib.auth.models import User

from tests.conftest import api_token
from tests.endpoints import World, api_routes, build_world, logged_in, page_routes

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(sandbox, settings) -> World:
    settings.DURABLE_LLM_BASE_URL = ""  # the deterministic planner
    return build_world(sandbox)


def never_stored(response) -> bool:
    return "no-store" in response.get("Cache-Control", "") and "private" in response["Cache-Control"]


def test_every_console_page_a_signed_in_user_opens_says_no_store(world):
    boss = User.objects.create_superuser("boss", password="pw-boss")
    browser = logged_in(boss)
    answers = {route.name: browser.get(world.url(route.name)) for route in page_routes()}
    assert len(answers) > 10 and answers["durable:overview"].status_code == 200  # the walk reached the console
    assert [name for name, answer in answers.items() if not never_stored(answer)] == []


def test_every_api_answer_to_a_token_holder_says_no_store(world):
    boss = User.objects.create_superuser("boss", password="pw-boss")
    token = api_token(boss)
    client = logged_in(boss)
    client.logout()  # the token alone signs the requests in
    answers = {route.name: client.get(world.url(route.name), HTTP_AUTHORIZATION=f"Token {token}")
               for route in api_routes()}
    assert answers["api:run-list"].status_code == 200
    assert [name for name, answer in answers.items() if not never_stored(answer)] == []


def test_the_login_page_is_not_stored_either(client):
    assert never_stored(client.get("/accounts/login/"))
