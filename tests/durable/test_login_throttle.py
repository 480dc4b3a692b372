"""One login throttle for the console, the browsable API and the admin: the attacks of item 5, performed."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import User
from django.test import Client

from durable.conf import durable_settings
from durable.login_throttle import normalised
from durable.models import SecurityEvent

pytestmark = pytest.mark.django_db

LOGINS = ["/accounts/login/", "/api/auth/login/", "/admin/login/"]


@pytest.fixture
def lockme(db):
    return User.objects.create_user("lockme1", password="the-right-password", is_staff=True)


def attempt(path: str, username: str, password: str, address: str = "198.51.100.1") -> int:
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password}).status_code


@pytest.mark.parametrize("path", LOGINS)
def test_every_login_form_is_throttled(lockme, settings, path):
    answers = [attempt(path, "lockme1", "wrong") for _ in range(durable_settings.DURABLE_LOGIN_ATTEMPTS + 1)]
    assert answers[-1] == 429 and 429 not in answers[:-1]
    assert attempt(path, "lockme1", "the-right-password") == 429  # even the right password waits


def test_a_full_width_username_is_the_same_user_for_the_throttle(lockme, settings):
    assert normalised("ｌockme1") == normalised("LOCKME1") == "lockme1"
    for _ in range(durable_settings.DURABLE_LOGIN_ATTEMPTS):
        attempt("/accounts/login/", "lockme1", "wrong")
    assert attempt("/accounts/login/", "ｌockme1", "the-right-password") == 429
    assert attempt("/accounts/login/", "LockMe1", "the-right-password") == 429


@pytest.mark.django_db(transaction=True)
def test_parallel_wrong_guesses_get_no_more_judgements_than_the_limit(lockme, settings):
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: attempt("/accounts/login/", "lockme1", "wrong"), range(24)))
    assert answers.count(200) == durable_settings.DURABLE_LOGIN_ATTEMPTS  # judged, and refused
    assert answers.count(429) == 24 - durable_settings.DURABLE_LOGIN_ATTEMPTS


def test_an_attacker_cannot_lock_the_real_user_out_from_elsewhere(lockme, settings):
    for _ in range(durable_settings.DURABLE_LOGIN_ATTEMPTS + 3):
        attempt("/accounts/login/", "lockme1", "wrong", address="203.0.113.66")
    assert attempt("/accounts/login/", "lockme1", "wrong", address="203.0.113.66") == 429
    assert attempt("/accounts/login/", "lockme1", "the-right-password", address="192.0.2.10") == 302


def test_one_address_spraying_many_usernames_is_throttled_too(settings):
    from durable.login_throttle import ADDRESS_FACTOR

    answers = [attempt("/accounts/login/", f"user{i}", "wrong") for i in range(
        durable_settings.DURABLE_LOGIN_ATTEMPTS * ADDRESS_FACTOR + 1)]
    assert answers[-1] == 429 and 429 not in answers[:-1]


def test_failed_and_throttled_logins_are_in_the_security_log(lockme, settings):
    for _ in range(durable_settings.DURABLE_LOGIN_ATTEMPTS + 1):
        attempt("/admin/login/", "ｌockme1", "wrong", address="203.0.113.7")
    kinds = list(SecurityEvent.objects.order_by("id").values_list("kind", "username", "address", "source"))
    assert kinds == [("login_failed", "ｌockme1", "203.0.113.7", "admin")] * durable_settings.DURABLE_LOGIN_ATTEMPTS + [
        ("login_throttled", "ｌockme1", "203.0.113.7", "admin")]
