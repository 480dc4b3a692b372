"""DURABLE_DEVELOPMENT: one setting for a developer's machine (plain HTTP, cookies without Secure, `runserver`), which
`check --deploy` refuses (durable.E050) and the ordinary checks, run before `runserver`, do not."""
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.checks import run_checks

from durable.checks import check_development
from durable.project.settings import serves_https
from tests.conftest import make_user

ROOT = Path(__file__).resolve().parents[3]


def test_development_serves_plain_http_whatever_else_the_environment_says():
    assert serves_https({}, debug=False, demo=False, development=False)  # production: HTTPS
    assert not serves_https({"DURABLE_HTTPS": "true"}, debug=False, demo=False, development=True)
    assert not serves_https({}, debug=True, demo=False, development=False)
    assert serves_https({"DURABLE_HTTPS": "1"}, debug=True, demo=False, development=False)


def test_the_standalone_project_in_development_sends_cookies_without_secure_and_needs_no_secret_key(tmp_path):
    environ = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"}
    shown = subprocess.run(
        [sys.executable, "-c", "from durable.project import settings as s; print(s.SESSION_COOKIE_SECURE, "
         "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, bool(s.SECRET_KEY))"],
        env={**environ, "DURABLE_DEVELOPMENT": "true", "DURABLE_VAR_DIR": str(tmp_path)}, cwd=ROOT,
        capture_output=True, text=True, check=True)
    assert shown.stdout.split() == ["False", "False", "False", "0", "True"]


def test_check_deploy_refuses_development_and_the_ordinary_checks_let_runserver_start(settings):
    settings.DURABLE_DEVELOPMENT = True
    assert "durable.E050" in {message.id for message in run_checks(include_deployment_checks=True)}
    assert "durable.E050" not in {message.id for message in run_checks()}
    settings.DURABLE_DEVELOPMENT = False
    assert "durable.E050" not in {message.id for message in run_checks(include_deployment_checks=True)}


def test_the_refusal_names_the_setting_and_the_way_out():
    [error] = check_development(True)
    assert error.obj == "DURABLE_DEVELOPMENT" and "plain HTTP" in error.msg and "Unset DURABLE_DEVELOPMENT" in error.hint
    assert check_development(False) == []


def log_in(base_url: str) -> int:
    """A Python client's login over plain HTTP: the form's CSRF cookie, then the post; the answer's status."""
    with httpx.Client(base_url=base_url) as client:
        client.get("/accounts/login/")
        token = client.cookies.get("csrftoken", "")
        return client.post("/accounts/login/", data={"username": "dev", "password": "pw-dev",
                                                     "csrfmiddlewaretoken": token}).status_code


@pytest.mark.django_db(transaction=True)
def test_a_python_client_logs_in_over_plain_http_with_the_development_cookies(live_server, settings):
    make_user("dev")
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True  # production's cookies, over plain HTTP
    assert log_in(live_server.url) == 403  # the client keeps a Secure cookie for HTTPS: no CSRF cookie sent back
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False  # what DURABLE_DEVELOPMENT sets
    assert log_in(live_server.url) == 302
