"""While the database is away, a real web process answers 503 with Retry-After: JSON for the API, a plain page
for the console and the login form.

The web process is a real gunicorn (durable.processes.WebProcess) whose DATABASE_URL names a
Postgres port nothing listens on: every connection it tries is refused, as when the database
is down or unreachable. The test's own database is untouched, so the rest of the suite runs on.
"""
import re

import httpx
import pytest

from durable.tools.processes import WebProcess, free_port
from durable.unavailable import RETRY_AFTER_SECONDS


@pytest.fixture(scope="module")
def web_without_database(tmp_path_factory):
    gone = f"postgres://durable@127.0.0.1:{free_port()}/durable"  # refused: nothing listens there
    web = WebProcess(env={"DATABASE_URL": gone}, log_path=tmp_path_factory.mktemp("web") / "web.log")
    web.start()
    try:
        with httpx.Client(base_url=web.url, timeout=30) as client:
            yield client
    finally:
        web.stop()


def unavailable(answer: httpx.Response) -> bool:
    return answer.status_code == 503 and answer.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)


def test_an_api_call_gets_503_in_json_with_retry_after(web_without_database):
    answer = web_without_database.get("/api/runs/", headers={"Authorization": "Token " + "a" * 40})
    assert unavailable(answer), answer.text
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.json() == {"detail": f"The database is unavailable. Try again in {RETRY_AFTER_SECONDS} seconds.",
                             "code": "database_unavailable"}


def test_a_console_page_gets_a_plain_temporarily_unavailable_page(web_without_database):
    answer = web_without_database.get("/runs/", headers={"Cookie": "sessionid=a-session-the-database-would-know"})
    assert unavailable(answer), answer.text
    assert answer.headers["Content-Type"].startswith("text/html")
    assert "Temporarily unavailable" in answer.text and "Traceback" not in answer.text
    assert "no-store" in answer.headers["Cache-Control"]


def test_signing_in_gets_the_same_page(web_without_database):
    form = web_without_database.get("/accounts/login/")  # anonymous: the form needs no database
    assert form.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    answer = web_without_database.post("/accounts/login/", data={
        "username": "ann", "password": "a-password-nobody-can-check", "csrfmiddlewaretoken": token,
    }, headers={"Referer": f"{web_without_database.base_url}/accounts/login/"})
    assert unavailable(answer), answer.text
    assert "Temporarily unavailable" in answer.text
