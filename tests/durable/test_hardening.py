"""Production hardening: throttled API calls, secure cookies and HSTS over HTTPS (login lockout: test_lockout.py)."""
import json
import os
import re
import secrets
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient
from rest_framework.throttling import UserRateThrottle

from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_api_calls_beyond_the_users_rate_get_429(monkeypatch):
    monkeypatch.setitem(UserRateThrottle.THROTTLE_RATES, "user", "3/min")
    api = APIClient()
    api.force_authenticate(make_user("reader", "durable.view_run"))
    statuses = [api.get("/api/runs/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]


SETTINGS_ENV = {"DATABASE_URL", "DJANGO_DEBUG", "DURABLE_HTTPS", "SECRET_KEY", "DURABLE_EMBEDDED_DEMO",
                "DURABLE_SSL_REDIRECT", "DURABLE_BEHIND_TLS_PROXY"}
A_KEY = "k3y-" * 15


def in_a_fresh_process(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run `code` with durable's settings in a new Python, under `env` and nothing of this process's settings."""
    clean = {k: v for k, v in os.environ.items() if k not in SETTINGS_ENV}
    return subprocess.run([sys.executable, "-c", code], env={**clean, "DJANGO_SETTINGS_MODULE": "durable.project.settings",
                                                            **env}, cwd=settings.BASE_DIR, capture_output=True,
                          text=True)


def production_settings(**env: str) -> dict:
    code = ("import json, django; from django.conf import settings as s; django.setup(); print(json.dumps({k: getattr(s, k) "
            "for k in ('DEBUG', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
            "'SECURE_SSL_REDIRECT', 'X_FRAME_OPTIONS', 'DURABLE_LOG_FORMAT', 'SECRET_KEY')}))")
    done = in_a_fresh_process(code, **env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_production_settings_use_secure_cookies_hsts_and_json_logs():
    prod = production_settings(DATABASE_URL="postgres://db/durable", SECRET_KEY=A_KEY)
    assert prod == {"DEBUG": False, "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True,
                    "SECURE_HSTS_SECONDS": 31536000, "SECURE_SSL_REDIRECT": True, "X_FRAME_OPTIONS": "DENY",
                    "DURABLE_LOG_FORMAT": "json", "SECRET_KEY": A_KEY}


def test_debug_off_without_a_database_url_is_still_served_over_https_only():
    prod = production_settings(SECRET_KEY=A_KEY)
    assert (prod["SESSION_COOKIE_SECURE"], prod["SECURE_HSTS_SECONDS"], prod["SECURE_SSL_REDIRECT"]) == (
        True, 31536000, True)


@pytest.mark.parametrize("environment", [
    {}, {"DATABASE_URL": "postgres://db/durable"}, {"SECRET_KEY": ""},
    {"SECRET_KEY": "insecure-embedded-default-change-me"}, {"SECRET_KEY": "..."},
    {"SECRET_KEY": "django-insecure-3x@mple-from-startproject"},
], ids=["nothing", "production-without-key", "empty", "old-embedded-default", "docs-placeholder", "startproject"])
def test_outside_the_demo_a_missing_or_published_secret_key_stops_every_process(environment, tmp_path):
    done = in_a_fresh_process("import django; django.setup()", DURABLE_VAR_DIR=str(tmp_path), **environment)
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is" in done.stderr and "Set SECRET_KEY to a long random value" in done.stderr
    assert not (tmp_path / "secret_key").exists()


def test_the_embedded_demo_makes_a_key_of_its_own_once_and_keeps_plain_cookies_for_http_on_localhost(tmp_path):
    demo = production_settings(DURABLE_EMBEDDED_DEMO="1", DURABLE_VAR_DIR=str(tmp_path))
    assert (demo["SESSION_COOKIE_SECURE"], demo["SECURE_HSTS_SECONDS"], demo["SECURE_SSL_REDIRECT"],
            demo["DURABLE_LOG_FORMAT"]) == (False, 0, False, "text")
    assert len(demo["SECRET_KEY"]) >= 50 and demo["SECRET_KEY"] == (tmp_path / "secret_key").read_text()
    again = production_settings(DURABLE_EMBEDDED_DEMO="1", DURABLE_VAR_DIR=str(tmp_path))
    assert again["SECRET_KEY"] == demo["SECRET_KEY"]  # the web process and the worker sign alike
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0
    assert production_settings(DJANGO_DEBUG="true", DURABLE_VAR_DIR=str(tmp_path))["SECRET_KEY"] == demo["SECRET_KEY"]


def documented_production_environment() -> dict[str, str]:
    """The `export` lines of docs/operations.md's production environment, its `<...>` placeholders filled in."""
    text = (settings.BASE_DIR / "docs" / "operations.md").read_text()
    block = text.split("The production environment", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    env = dict(line.removeprefix("export ").split("=", 1) for line in block.strip().splitlines())
    return {name: re.sub(r"<[^>]*>", lambda _: secrets.token_urlsafe(50), value) for name, value in env.items()}


def test_check_deploy_reports_nothing_on_the_production_environment_the_docs_show(tmp_path):
    env = documented_production_environment()
    assert {"SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "DURABLE_BEHIND_TLS_PROXY"} <= set(env)
    clean = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "LANG", "PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          env={**clean, "DURABLE_VAR_DIR": str(tmp_path), **env}, cwd=settings.BASE_DIR,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


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
