"""Login lockout (django-axes, durable/lockout.py): every door, a botnet, an office behind one address, the log."""
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from rest_framework.settings import api_settings

from durable.lockout import ADDRESS_FACTOR, normalised
from durable.models import SecurityEvent

pytestmark = pytest.mark.django_db

DOORS = {"console": "/accounts/login/", "api": "/api/auth/login/", "admin": "/admin/login/"}
RIGHT = "the-right-password"


@pytest.fixture
def lockme(db):
    return User.objects.create_user("lockme1", password=RIGHT, is_staff=True)  # staff: the admin lets them in


def limit() -> int:
    return django_settings.AXES_FAILURE_LIMIT


def attempt(path: str, username: str, password: str, address: str = "198.51.100.1") -> Client:
    client = Client(REMOTE_ADDR=address)
    client.response = client.post(path, {"username": username, "password": password})
    return client


def status(path: str, username: str, password: str, address: str = "198.51.100.1") -> int:
    return attempt(path, username, password, address).response.status_code


def lock(username: str = "lockme1", path: str = DOORS["console"]) -> None:
    for _ in range(limit()):
        status(path, username, "wrong")


@pytest.mark.parametrize("path", DOORS.values(), ids=DOORS.keys())
def test_every_door_locks_a_username_out_and_then_refuses_the_right_password(lockme, path):
    answers = [status(path, "lockme1", "wrong") for _ in range(limit())]
    assert answers == [200] * (limit() - 1) + [429]  # the failure that reaches the limit is answered 429
    refused = attempt(path, "lockme1", RIGHT, address="192.0.2.77")
    assert refused.response.status_code == 429 and "_auth_user_id" not in refused.session
    assert b"Too many failed attempts. Wait up to 15 minutes" in refused.response.content


def test_the_console_says_so_on_its_own_login_page(lockme):
    lock()
    page = attempt(DOORS["console"], "lockme1", RIGHT).response
    assert page.status_code == 429 and page.templates[0].name == "durable/login.html"
    assert b"Too many failed attempts. Wait up to 15 minutes and try again." in page.content


def test_a_botnet_of_six_addresses_locks_the_username_for_a_seventh(lockme):
    answers = [status(DOORS["console"], "lockme1", "wrong", address=f"203.0.113.{i}") for i in range(1, 7)]
    assert 429 in answers  # the limit (5) was reached from five different addresses
    assert status(DOORS["console"], "lockme1", RIGHT, address="203.0.113.99") == 429


def test_good_logins_never_count_against_an_address(lockme):
    assert [status(DOORS["console"], "lockme1", RIGHT) for _ in range(25)] == [302] * 25


def test_an_office_behind_one_address_may_fail_more_than_one_user_may(lockme):
    office = "198.51.100.50"
    allowance = limit() * ADDRESS_FACTOR
    for i in range(allowance - 1):  # many colleagues, each mistyping once: no username near its limit
        assert status(DOORS["console"], f"colleague{i}", "wrong", address=office) == 200
    assert status(DOORS["console"], "lockme1", RIGHT, address=office) == 302
    assert status(DOORS["console"], "colleague-last", "wrong", address=office) == 429  # the address's allowance
    assert status(DOORS["console"], "lockme1", RIGHT, address=office) == 429  # password spraying stops here
    assert status(DOORS["console"], "lockme1", RIGHT, address="192.0.2.10") == 302  # but not lockme1 elsewhere


def test_a_full_width_or_capitalised_username_is_the_same_user_for_the_lockout(lockme):
    assert normalised("ｌockme1") == normalised("LOCKME1") == "lockme1"
    for username in ("ｌockme1", "LockMe1", "LOCKME1", "lockme1", "lockme1"):
        status(DOORS["console"], username, "wrong", address="203.0.113.5")
    assert status(DOORS["console"], "lockme1", RIGHT, address="192.0.2.10") == 429


def test_the_lock_lasts_its_cool_off_and_no_longer(lockme):
    lock()
    assert status(DOORS["console"], "lockme1", RIGHT) == 429
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16))
    assert status(DOORS["console"], "lockme1", RIGHT) == 302


@pytest.mark.parametrize(("command", "argument"), [("axes_reset_username", "lockme1"),
                                                   ("axes_reset_ip", "198.51.100.1"), ("axes_reset", None)])
def test_an_operator_lifts_a_lock_with_axes_commands(lockme, command, argument):
    lock()
    assert status(DOORS["console"], "lockme1", RIGHT, address="192.0.2.10") == 429
    if command == "axes_reset_ip":  # the address held every failure; the username's own count goes with them
        call_command(command, argument)
    else:
        call_command(command, *([argument] if argument else []))
    assert status(DOORS["console"], "lockme1", RIGHT, address="192.0.2.10") == 302


def test_failures_lockouts_and_refusals_are_in_the_security_log(lockme):
    for _ in range(limit()):
        status(DOORS["admin"], "ｌockme1", "wrong", address="203.0.113.7")
    status(DOORS["admin"], "lockme1", RIGHT, address="203.0.113.8")
    rows = list(SecurityEvent.objects.order_by("id").values_list("kind", "username", "address", "source"))
    # The failure that reached the limit writes both its failure and the lock (in the order the apps' receivers run).
    assert sorted(rows[:-1]) == sorted([("login_failed", "ｌockme1", "203.0.113.7", "admin")] * limit() + [
        ("login_throttled", "ｌockme1", "203.0.113.7", "admin")])
    assert rows[-1] == ("login_throttled", "lockme1", "203.0.113.8", "admin")  # the right password, refused unjudged
    assert "locked out for 15 minutes" in SecurityEvent.objects.latest("id").reason


def test_the_api_takes_no_password_so_it_is_no_oracle(lockme):
    """Only API tokens authenticate an API call: a username and password in Basic auth get 401, unjudged."""
    classes = [cls.__name__ for cls in api_settings.DEFAULT_AUTHENTICATION_CLASSES]
    assert classes == ["ApiTokenAuthentication", "SessionAuthentication"]
    import base64

    basic = "Basic " + base64.b64encode(f"lockme1:{RIGHT}".encode()).decode()
    assert Client().get("/api/runs/", HTTP_AUTHORIZATION=basic).status_code == 401
    assert not SecurityEvent.objects.filter(kind="login_failed").exists()  # no password was checked


@pytest.mark.parametrize(("installed", "parameters", "warned"), [
    (True, ["username", "ip_address"], False),
    (True, ["username"], False),
    (True, None, True),  # axes' own default: by address only
    (True, [["username", "ip_address"]], True),  # the pair only: a botnet is never stopped
    (False, ["username", "ip_address"], True),
])
def test_check_warns_when_no_username_is_locked_out_across_addresses(installed, parameters, warned):
    from durable.checks import check_login_lockout

    found = check_login_lockout(installed, parameters)
    assert [m.id for m in found] == (["durable.W030"] if warned else [])


@pytest.mark.django_db(transaction=True)
def test_parallel_wrong_guesses_are_judged_at_most_the_limit_plus_the_burst_and_end_in_a_lock(lockme):
    """axes judges a guess before it counts it: of a burst sent at once, those judged before the first failures
    are written may pass the limit, by at most the requests served at once (docs/operations.md says so); the
    rest are refused unjudged, nothing fails, and the burst leaves the username locked."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def guess(i: int) -> int:
        try:
            return status(DOORS["console"], "lockme1", "wrong", address=f"203.0.113.{i}")
        finally:
            connection.close()  # each thread's own; left open, the test database cannot be dropped

    at_once = 8
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        answers = list(pool.map(guess, range(24)))
    judged = SecurityEvent.objects.filter(kind="login_failed").count()
    assert set(answers) <= {200, 429} and limit() <= judged <= limit() + at_once - 1
    assert answers.count(429) >= 24 - judged
    assert status(DOORS["console"], "lockme1", RIGHT, address="192.0.2.10") == 429


def test_an_operator_sees_and_lifts_a_lock_in_the_admin(lockme):
    lock()
    admin = User.objects.create_superuser("root", password="root-password-long")
    client = Client()
    client.force_login(admin)
    listing = client.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and b"lockme1" in listing.content
    [row] = AccessAttempt.objects.all()
    assert client.post(f"/admin/axes/accessattempt/{row.pk}/delete/", {"post": "yes"}).status_code == 302
    assert status(DOORS["console"], "lockme1", RIGHT) == 302
