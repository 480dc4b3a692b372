"""durable adopted by an existing Django project: its own users, Celery app and URLs, the console under /ops/.

Run here from the checkout, and by bin/test-package from a wheel installed in a fresh venv.
"""
from __future__ import annotations

import json
import os
import re
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from approvals.models import ApprovalRequest
from durable.models import Run, SideEffect
from durable.roles import APPROVER, OPERATOR, RECONCILER
from tests.conftest import database_url, manage, project_env, wait_until

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def console_login(username: str) -> Client:
    """Log in through the console's own login page at /ops/, CSRF checks on, as a browser would."""
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/ops/accounts/login/")
    assert page.status_code == 200
    answer = browser.post("/ops/accounts/login/", {"username": username, "password": f"pw-{username}-long-enough",
                                                   "csrfmiddlewaretoken": CSRF.search(page.content.decode())[1]})
    assert answer.status_code == 302 and answer["Location"] == "/ops/", answer.content.decode()[:500]
    return browser


def start_refund(browser: Client, order_id: str) -> str:
    answer = browser.post("/ops/api/runs/", json.dumps({"workflow": "shop-refund", "business_key": order_id,
                                                        "input": {"order_id": order_id, "reason": "arrived broken"}}),
                          content_type="application/json", HTTP_X_CSRFTOKEN=browser.cookies["csrftoken"].value)
    assert answer.status_code == 201, answer.content
    return answer.json()["id"]


def status_is(run_id: str, status: str):
    return lambda: Run.objects.filter(id=run_id, status=status).first()


def approve_in_console(browser: Client, request: ApprovalRequest):
    """Open the request's page and press Approve on the snapshot it shows."""
    page = browser.get(f"/ops/approvals/{request.id}/").content.decode()
    shown = re.search(r'name="snapshot_hash" value="([0-9a-f]{64})"', page)
    assert shown, "the approval page offers no decision form"
    return browser.post(f"/ops/approvals/{request.id}/decide/", {
        "verdict": "approve", "snapshot_hash": shown[1], "csrfmiddlewaretoken": CSRF.search(page)[1]})


def waiting_request(run_id: str) -> ApprovalRequest:
    wait_until(status_is(run_id, "WAITING_APPROVAL"), f"run {run_id} to wait for approval")
    return ApprovalRequest.objects.get(run_id=run_id, status="PENDING")


def test_durable_is_imported_from_the_install_under_test_and_its_tools_are_not():
    import durable

    expected = os.environ.get("HOST_EXPECT_DURABLE_IN")  # bin/test-package: the fresh venv's site-packages
    if expected:
        assert Path(durable.__file__).resolve().is_relative_to(Path(expected).resolve()), durable.__file__
    assert "durable.tools" not in settings.INSTALLED_APPS
    assert not [name for name in sys.modules if name.startswith("durable.tools")]


def test_the_documented_commands_run_against_a_fresh_database(tmp_path):
    env = project_env(DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    migrated = manage("migrate", "--noinput", env=env).stdout
    # The shop's user model comes first, durable's migrations after it (swappable_dependency).
    assert migrated.index("Applying shop.0001_initial") < migrated.index("Applying durable.0001_initial")
    checked = manage("check", "--fail-level", "WARNING", env=env)  # durable's system checks pass the shop's code
    assert "no issues" in checked.stdout + checked.stderr
    manage("durable_alert_rules", "--out", str(tmp_path), env=env)
    assert (tmp_path / "durable-alerts.yml").read_text() == (files("durable") / "prometheus/durable-alerts.yml").read_text()


@pytest.mark.django_db
def test_the_shops_home_page_is_its_own_and_links_to_the_console(client):
    page = client.get("/")
    assert page.status_code == 200 and 'href="/ops/"' in page.content.decode()


@pytest.mark.django_db
def test_a_console_page_renders_with_durables_stylesheet_and_the_hosts_layout_override(collected_static):
    browser = Client()
    page = browser.get("/ops/accounts/login/").content.decode()
    assert '<a class="brand" href="/ops/">Shop operations</a>' in page  # host/templates/durable/base.html
    stylesheet = re.search(r'<link rel="stylesheet" href="([^"]+)"', page)[1]
    assert stylesheet == "/static/durable/console.css"
    css = browser.get(stylesheet)
    assert css.status_code == 200 and css["Content-Type"].startswith("text/css")
    assert b"".join(css.streaming_content) == (files("durable") / "static/durable/console.css").read_bytes()


def test_a_refund_is_approved_by_a_second_person_and_paid_once_by_the_hosts_worker(worker, service, make_user):
    service.state.add_order("SO-1", "42.00")
    make_user("clerk", OPERATOR, APPROVER)  # may start runs and approve, but never their own
    make_user("ann", APPROVER)
    clerk = console_login("clerk")

    run_id = start_refund(clerk, "SO-1")
    request = waiting_request(run_id)
    assert request.snapshot["amount"] == "42.00"

    refused = clerk.post(f"/ops/approvals/{request.id}/decide/", {
        "verdict": "approve", "snapshot_hash": request.snapshot_hash,
        "csrfmiddlewaretoken": clerk.cookies["csrftoken"].value})
    assert refused.status_code == 403  # separation of duties: the starter cannot approve
    assert ApprovalRequest.objects.get(id=request.id).status == "PENDING"

    assert approve_in_console(console_login("ann"), request).status_code in (200, 302)
    run = wait_until(status_is(run_id, "SUCCEEDED"), "the worker to finish the approved refund")
    assert run.output == {"refund_id": "rf-1", "notice_id": "ntc-1"}
    assert len(service.state.refund_calls) == 1 and service.state.orders["SO-1"]["refunded"]


def test_a_notice_whose_answer_was_lost_is_settled_in_the_console_and_the_run_goes_on(worker, service, make_user):
    service.state.add_order("SO-2", "15.50")
    service.state.lose_answer_for.add("SO-2")
    make_user("clerk", OPERATOR)
    make_user("ann", APPROVER)
    make_user("rita", RECONCILER)

    run_id = start_refund(console_login("clerk"), "SO-2")
    approve_in_console(console_login("ann"), waiting_request(run_id))
    wait_until(status_is(run_id, "NEEDS_ATTENTION"), "the lost notice to need an operator")
    operation = SideEffect.objects.get(run_id=run_id, action_name="notice")
    assert operation.status == "UNKNOWN"  # sent, answer lost, no key, no lookup: the machine cannot know
    sent = service.state.notices[0]
    assert sent["key"] == operation.operation_id

    rita = console_login("rita")
    page = rita.get(f"/ops/reconciliation/{operation.operation_id}/")
    assert page.status_code == 200 and operation.operation_id in page.content.decode()
    resolved = rita.post(f"/ops/reconciliation/{operation.operation_id}/resolve/", {
        "outcome": "succeeded", "external_ref": sent["notice_id"], "result": json.dumps({"delivered": True}),
        "reason": "the customer's mailbox has the notice", "csrfmiddlewaretoken": CSRF.search(page.content.decode())[1]})
    assert resolved.status_code in (200, 302), resolved.content.decode()[:500]

    run = wait_until(status_is(run_id, "SUCCEEDED"), "the run to go on after the resolution")
    assert run.output["notice_id"] == sent["notice_id"]
    assert len(service.state.notices) == 1  # settled by a person, never sent again


def test_the_hosts_celery_app_finds_durables_tasks_and_needs_no_beat():
    from host.celery import app

    from durable.checks import something_sweeps

    app.loader.import_default_modules()  # what a worker does at start: autodiscover_tasks() runs here
    assert {"durable.advance_run", "durable.sweep"} <= set(app.tasks)
    assert getattr(settings, "CELERY_BEAT_SCHEDULE", None) is None  # the host starts no beat:
    assert something_sweeps() == []  # its workers sweep (DURABLE_WORKER_SWEEPS), so durable.W016 stays quiet


@pytest.mark.django_db
def test_a_service_calls_the_api_with_a_token_made_by_the_command_and_a_revoked_one_is_refused():
    from io import StringIO

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from durable.models import ApiToken

    intake = get_user_model().objects.create_user("intake", password="pw-intake-long-enough")
    intake.groups.add(Group.objects.get(name=OPERATOR))
    printed = StringIO()
    call_command("durable_tokens", "create", "--user", "intake", "--name", "shop intake", stdout=printed)
    token = printed.getvalue().strip()
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/ops/api/runs/").status_code == 200
    call_command("durable_tokens", "revoke", ApiToken.objects.get(user__username="intake").prefix, stdout=StringIO())
    refused = api.get("/ops/api/runs/")
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]


def test_the_hosts_logins_lock_a_username_out_across_addresses_and_every_403_is_logged(make_user):
    """The lockout and the refusal log a host gets from the settings docs/embedding.md shows (django-axes)."""
    from durable.models import SecurityEvent

    make_user("guessed", OPERATOR)
    for i in range(settings.AXES_FAILURE_LIMIT):  # one guess from each address of a botnet
        Client(REMOTE_ADDR=f"203.0.113.{i}").post("/ops/accounts/login/", {"username": "guessed", "password": "x"})
    locked = Client(REMOTE_ADDR="192.0.2.1").post("/ops/accounts/login/", {
        "username": "guessed", "password": "pw-guessed-long-enough"})
    assert locked.status_code == 429 and b"Too many failed attempts" in locked.content
    assert SecurityEvent.objects.filter(kind="login_throttled", username="guessed").exists()
    viewer = Client()
    viewer.force_login(make_user("viewer-only"))
    assert viewer.get("/ops/audit/").status_code == 403
    refused = SecurityEvent.objects.get(kind="forbidden", username="viewer-only")
    assert refused.target == "/ops/audit/" and "permission" in refused.reason


DRILL = ["durable_drill", "--settings", "durable.tools.drill_settings", "--workflow", "shop-refund",
         "--target", "tests.drill_target.ShopDrill", "--runs-per-cell", "1", "--workers", "1", "--timeout", "120"]


@pytest.mark.django_db(transaction=True)
def test_the_fault_drill_drills_the_shops_workflow_approving_as_its_own_account_and_clears_w011():
    """docs/fault-drill.md, "Drilling a host project's workflows": the drill under durable.tools.drill_settings,
    the shop's own settings, Celery app and user model, a stand-in of the shop's service; the production settings
    never install durable.tools."""
    from durable.models import DrillRecord, OperatorAction

    env = project_env(DATABASE_URL=database_url(settings.DATABASES["default"]), DURABLE_DRILL_SETTINGS="host.settings")
    check = ["check", "--tag", "durable", "--database", "default"]
    before = manage(*check, env=env)
    assert "shop-refund v1: (durable.W011)" in before.stderr and "--target" in before.stderr

    drilled = manage(*DRILL, env=env, timeout=1200).stdout  # 8 cells, each with a worker booted and crashed
    assert "durable_drill: shop-refund v1, 1 run(s) per cell, 4 fault point(s) x 2 action(s)" in drilled
    assert ("totals: 8 runs, 8 crash(es) injected, 8 approval(s) decided by the drill's account, "
            "0 duplicate effect(s), 0 lost, 0 cell(s) in violation") in drilled, drilled
    for action in ("refund (shop-refunds)", "notice (shop-notices)"):
        assert drilled.count(action) == 4
    record = DrillRecord.objects.get()
    assert (record.workflow_name, record.workflow_version, record.passed, record.actions) == (
        "shop-refund", 1, True, ["notice", "refund"])
    # Each approval went through the approvals app's decision as the drill's approver, a shop.User of its own.
    approvals = OperatorAction.objects.filter(action="approve", run__workflow_name="shop-refund")
    assert approvals.count() == 8 and {a.source for a in approvals} == {"command"}
    [approver] = {a.actor for a in approvals}
    assert type(approver) is get_user_model() and approver.username.startswith("durable-tool-drill-approver-")
    assert not approver.is_active  # retired when the drill ended
    assert "durable.W011" not in manage(*check, env=env).stderr  # the launch check is satisfied
