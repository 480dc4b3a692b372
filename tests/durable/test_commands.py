"""The management commands a new user runs: the demo launcher and the benchmark, as real processes."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from contextlib import closing

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command

pytestmark = pytest.mark.worker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_launcher_starts_everything_and_a_claims_run_and_the_support_agent_complete_after_approvals(
        tmp_path):
    port, sandbox_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "PROMETHEUS_MULTIPROC_DIR"}}
    env["DURABLE_VAR_DIR"] = str(tmp_path / "var")  # the embedded default: SQLite + filesystem broker, its metrics
    env["DURABLE_EMBEDDED_DEMO"] = "1"  # as bin/demo sets it: plain HTTP, a key of its own in var/
    out = tmp_path / "demo.out"
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "durable_up", "--port", str(port), "--sandbox-port", str(sandbox_port)],
        cwd=settings.BASE_DIR, env=env, stdout=open(out, "w"), stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while "API token" not in out.read_text():
            assert demo.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        printed = out.read_text()
        assert f"http://127.0.0.1:{port}/" in printed and "operator / durable-demo" in printed
        token = re.search(r"API token:\s+(\S+)", printed).group(1)
        base = f"http://127.0.0.1:{port}"
        wait_for_http(base)
        with httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=10) as intake:
            started = intake.post("/api/runs/", json={
                "workflow": "claims-agent", "business_key": "ORD-1002",
                "input": {"order_id": "ORD-1002", "customer_message": "I was charged twice for ORD-1002, please refund"},
            })
            assert started.status_code == 201, started.text
            wait_for_status(intake, started.json()["url"], "WAITING_APPROVAL")
            # 1450.00 EUR: two different people approve, in their own browser sessions.
            for username in ("operator", "reviewer"):
                with closing(logged_in(base, username)) as browser:
                    assert "ORD-1002" in browser.get("/runs/").text  # the console lists the run
                    approve_pending(browser, "ORD-1002")
            run = wait_for_status(intake, started.json()["url"], "SUCCEEDED")
            # The example support-agent run: its tool-calling loop asked for a refund, which waits for approval.
            [support] = intake.get("/api/runs/", params={"workflow": "support-agent"}).json()["results"]
            wait_for_status(intake, support["url"], "WAITING_APPROVAL")
            with closing(logged_in(base, "operator")) as browser:
                approve_pending(browser, "ORD-1004")
            answered = wait_for_status(intake, support["url"], "SUCCEEDED")
        assert run["output"]["proposed_refund"]["amount"] == "1450.00" and run["output"]["refund_id"]
        assert answered["output"]["refund_id"] and answered["output"]["answer"].startswith("I refunded 89.90 EUR")
    finally:
        demo.terminate()
        demo.wait(30)
    assert demo.returncode is not None


def logged_in(base: str, username: str) -> httpx.Client:
    browser = httpx.Client(base_url=base, timeout=10)
    login = browser.get("/accounts/login/")
    page = browser.post("/accounts/login/", data={"username": username, "password": "durable-demo",
                                                  "csrfmiddlewaretoken": browser.cookies["csrftoken"], "next": "/"},
                        headers={"Referer": str(login.url)}, follow_redirects=True)
    assert page.status_code == 200 and username in page.text
    return browser


def approve_pending(browser: httpx.Client, business_key: str) -> None:
    pending = browser.get("/api/approvals/", params={"business_key": business_key}).json()["results"]
    assert len(pending) == 1, pending
    approved = browser.post(f"/api/approvals/{pending[0]['id']}/approve/",
                            json={"snapshot_hash": pending[0]["snapshot_hash"]},
                            headers={"X-CSRFToken": browser.cookies["csrftoken"]})
    assert approved.status_code == 200, approved.text


def wait_for_http(base: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(base + "/accounts/login/", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("the console did not answer")


def wait_for_status(api: httpx.Client, url: str, status: str) -> dict:
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        run = api.get(url).json()
        if run["status"] == status:
            return run
        time.sleep(0.2)
    raise AssertionError(f"run never reached {status}: {run}")


@pytest.mark.django_db(transaction=True)
def test_benchmark_reports_one_commit_per_step_plus_one_lease_claim_per_run(capsys):
    call_command("durable_bench", runs=3, steps=4, workers=1, timeout=60)
    report = capsys.readouterr().out
    assert "3 runs x 4 steps, 1 worker(s)" in report
    assert "SQL commits          15 = 1.25 per step" in report  # 12 step writes + 3 claims
    assert "advance tasks        3 = 1.00 per run" in report  # no broker message per step
    assert re.search(r"steps/s\s+\d+\.\d", report) and re.search(r"p50 / p99\s+[\d.]+ ms / [\d.]+ ms", report)


@pytest.mark.django_db(transaction=True)
def test_console_benchmark_times_each_page_against_its_budget_on_postgres(capsys):
    from django.core.management.base import CommandError
    from django.db import connection

    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="needs Postgres"):
            call_command("durable_console_bench", runs=1000, approvals=5, repeat=1)
        return
    # A production-configured install: its own host name only, and HTTPS enforced (issue 18: DisallowedHost).
    from django.test.utils import override_settings

    with override_settings(ALLOWED_HOSTS=["console.example.com"], SECURE_SSL_REDIRECT=True):
        call_command("durable_console_bench", runs=3000, approvals=20, repeat=3)
    report = capsys.readouterr().out
    assert "seeding 3,000 runs and 20 pending approvals" in report and "at https://console.example.com/" in report
    for page, answer in (("runs, status=FAILED", 200), ("approvals inbox", 200), ("overview", 200),
                         ("overview, poll", 200), ("overview, poll unchanged", 304), ("run page", 200),
                         ("run page, poll unchanged", 304), ("approvals inbox, poll unchanged", 304),
                         ("reconciliation queue, poll", 200), ("operation page, poll unchanged", 304), ("approval page", 200),
                         ("operation page", 200), ("reconciliation queue", 200), ("search, run id", 302),
                         ("search, operation id", 302), ("search, approval id", 302),
                         ("search, business key part", 200), ("search, customer email", 302)):
        assert re.search(rf"{re.escape(page)}\s+\d+\s+{answer}\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(ok|OVER)", report), page
    assert re.search(r"approvals inbox\s+20\s", report)  # every seeded request is listed
    # ORD-37 and ORD-370..379 of the 3,000 seeded runs, and their customers
    assert re.search(r"search, business key part\s+11\s", report) and re.search(r"search, customer part\s+11\s", report)
    from durable.models import Run
    assert not Run.objects.filter(workflow_name__startswith="bench-console-").exists()  # cleaned up


@pytest.mark.django_db(transaction=True)
def test_retention_benchmark_prunes_what_it_seeded_on_postgres(capsys):
    from django.core.management.base import CommandError
    from django.db import connection

    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="needs Postgres"):
            call_command("durable_retention_bench", runs=10)
        return
    call_command("durable_retention_bench", runs=500, batch=200)
    report = capsys.readouterr().out
    assert "pruned 500 finished run(s): 1000 checkpoint(s) and 1500 journal entries deleted" in report
    assert "left 500 checkpoints (one per run) and 0 journal entries" in report
