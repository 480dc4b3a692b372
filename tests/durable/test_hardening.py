"""Production hardening: throttled logins and API calls, secure cookies and HSTS over HTTPS."""
import json
import os
import subprocess
import sys
import warnings

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache.backends.base import CacheKeyWarning
from django.test import Client
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def log_in(client: Client, password: str):
    return client.post("/accounts/login/", {"username": "ann", "password": password})


def test_failed_logins_are_throttled_per_username_and_say_so(settings):
    User.objects.create_user("ann", password="right-password")
    client = Client()
    for _ in range(settings.DURABLE_LOGIN_ATTEMPTS):
        assert log_in(client, "wrong").status_code == 200  # the form again, with its error
    refused = log_in(client, "right-password")
    assert refused.status_code == 429 and b"Too many failed attempts" in refused.content
    assert "_auth_user_id" not in client.session  # even the right password waits out the window


def test_a_successful_login_clears_the_usernames_failures(settings):
    User.objects.create_user("ann", password="right-password")
    client = Client()
    for _ in range(settings.DURABLE_LOGIN_ATTEMPTS - 1):
        log_in(client, "wrong")
    assert log_in(client, "right-password").status_code == 302
    other = Client(REMOTE_ADDR="10.0.0.2")
    for _ in range(settings.DURABLE_LOGIN_ATTEMPTS - 1):
        assert log_in(other, "wrong").status_code == 200  # the count started again


def test_a_hostile_username_is_throttled_too_under_a_key_any_cache_accepts(settings):
    client = Client()
    hostile = {"username": "a\x00b c" + "x" * 140, "password": "wrong"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheKeyWarning)  # what memcached would refuse
        answers = [client.post("/accounts/login/", hostile).status_code
                   for _ in range(settings.DURABLE_LOGIN_ATTEMPTS + 1)]
    assert answers[-1] == 429 and set(answers[:-1]) == {200}


def test_api_calls_beyond_the_users_rate_get_429(monkeypatch):
    monkeypatch.setitem(UserRateThrottle.THROTTLE_RATES, "user", "3/min")
    api = APIClient()
    api.force_authenticate(make_user("reader", "durable.view_run"))
    statuses = [api.get("/api/runs/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


def production_settings(**env: str) -> dict:
    code = ("import json, django; from django.conf import settings as s; django.setup(); print(json.dumps({k: getattr(s, k) "
            "for k in ('DEBUG', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
            "'X_FRAME_OPTIONS', 'DURABLE_LOG_FORMAT')}))")
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_DEBUG", "DURABLE_HTTPS"}}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, "DJANGO_SETTINGS_MODULE": "durable.project.settings",
                                                            **env}, cwd=settings.BASE_DIR, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_production_settings_use_secure_cookies_hsts_and_json_logs():
    prod = production_settings(DATABASE_URL="postgres://db/durable", SECRET_KEY="k" * 50)
    assert prod == {"DEBUG": False, "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True,
                    "SECURE_HSTS_SECONDS": 31536000, "X_FRAME_OPTIONS": "DENY", "DURABLE_LOG_FORMAT": "json"}


def test_the_embedded_demo_keeps_plain_cookies_for_http_on_localhost():
    demo = production_settings()
    assert (demo["SESSION_COOKIE_SECURE"], demo["SECURE_HSTS_SECONDS"], demo["DURABLE_LOG_FORMAT"]) == (False, 0, "text")


def test_every_page_carries_a_content_security_policy_that_allows_only_our_own_files():
    client = Client()
    client.force_login(make_user("vera", "durable.view_run"))
    policy = client.get("/runs/")["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"  # no inline script, no eval, no CDN
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'"
    assert "Content-Security-Policy" in Client().get("/accounts/login/")  # before logging in too
