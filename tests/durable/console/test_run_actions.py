"""Steering a run from its page: cancel, retry now, resume, migrate, each confirmed, permitted and audited."""
import pytest
from django.contrib.messages import get_messages
from django.test import Client

from durable.engine.states import RunStatus
from durable.models import Run
from tests.audit import operator_actions
from tests.conftest import make_user
from tests.durable import version_workflows as vw
from tests.durable.console.screens import (
    HTMX,
    VIEW,
    action_url,
    client_for,
    detail_url,
    run_in,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return make_user("olivia", VIEW, "durable.cancel_run", "durable.retry_run", "durable.resume_run",
                     "durable.migrate_run")


@pytest.fixture
def console(operator):
    return client_for(operator)


def confirmed(reason="checked with the customer", **extra):
    return {"reason": reason, "confirm": "on", **extra}


def blocked_v1(position="b"):
    """A run of test-versioned v1 blocked at `position`; v2 declares a migration from v1 for a and b only."""
    return run_in(RunStatus.BLOCKED_VERSION, workflow=vw.NAME, version=1, current_step=position,
                  error={"kind": "version_missing", "message": "this worker has no test-versioned v1"})


def status_of(run):
    return Run.objects.values_list("status", flat=True).get(id=run.id)


# Cancel


def test_a_confirmed_cancel_cancels_the_run_audited_from_the_console(console, operator):
    run = run_in(RunStatus.WAITING_RETRY)
    response = console.post(action_url(run, "cancel"), confirmed("duplicate claim"))
    assert (response.status_code, response["Location"]) == (302, detail_url(run))
    assert status_of(run) == RunStatus.CANCELLED
    action = operator_actions().get(run=run)
    assert (action.actor, action.action, action.source, action.status_before, action.status_after, action.reason) == (
        operator, "cancel", "console", "WAITING_RETRY", "CANCELLED", "duplicate claim")
    [message] = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("Cancelled. The run will not run again. No side effect of it had happened.")


def test_a_cancel_without_confirmation_is_refused_and_changes_nothing(console):
    run = run_in(RunStatus.PENDING)
    response = console.post(action_url(run, "cancel"), {"reason": "oops"})
    assert response.status_code == 400
    assert "Nothing was done: tick “I confirm” to go ahead" in response.content.decode()
    assert status_of(run) == RunStatus.PENDING and not operator_actions().exists()


def test_cancelling_a_finished_run_is_a_conflict_showing_its_status(console):
    run = run_in(RunStatus.SUCCEEDED)
    response = console.post(action_url(run, "cancel"), confirmed())
    html = response.content.decode()
    assert response.status_code == 409
    assert "Cannot cancel a run that is SUCCEEDED." in html
    assert 'The run is <span class="status status-succeeded">SUCCEEDED</span>.' in html
    assert "The run has ended; nothing more can be done to it." in html
    assert not operator_actions().exists()


def test_with_htmx_an_action_answers_with_the_runs_live_region_in_its_new_status(console):
    run = run_in(RunStatus.PENDING)
    refused = console.post(action_url(run, "cancel"), {}, **HTMX)
    assert refused.status_code == 400 and refused.content.decode().lstrip().startswith('<div id="run-live"')
    assert "<details class=\"run-action\" open>" in refused.content.decode()  # the form with its error, open
    done = console.post(action_url(run, "cancel"), confirmed(), **HTMX)
    html = done.content.decode()
    assert done.status_code == 200 and html.lstrip().startswith('<div id="run-live"') and "<html" not in html
    assert "Cancelled. The run will not run again." in html
    assert '<span id="run-status" class="status status-cancelled">CANCELLED</span>' in html
    assert "The run has ended; nothing more can be done to it." in html and "Cancel the run" not in html
    again = console.post(action_url(run, "cancel"), confirmed(), **HTMX)
    assert again.status_code == 409 and "Cannot cancel a run that is CANCELLED" in again.content.decode()


def test_the_action_forms_post_through_htmx_into_the_panel_with_a_required_confirmation(console):
    run = run_in(RunStatus.PENDING)
    html = console.get(detail_url(run)).content.decode()
    url = action_url(run, "cancel")
    assert f'<form method="post" action="{url}" hx-post="{url}" hx-target="#run-live" hx-swap="outerHTML">' in html
    assert '<input type="checkbox" name="confirm" required id="id_confirm"> I confirm: cancel the run' in html


# Retry, resume, migrate


@pytest.mark.parametrize("status", [RunStatus.WAITING_RETRY, RunStatus.FAILED])
def test_retry_now_puts_a_waiting_or_failed_run_back_to_work(console, status):
    run = run_in(status, error={"kind": "transient", "message": "busy"})
    response = console.post(action_url(run, "retry"), confirmed())
    assert response.status_code == 302 and status_of(run) == RunStatus.PENDING
    assert operator_actions().get(run=run).action == "retry"


def test_retry_is_refused_for_a_run_that_is_not_waiting_or_failed(console):
    run = run_in(RunStatus.PENDING)
    response = console.post(action_url(run, "retry"), confirmed())
    assert response.status_code == 409 and "Cannot retry a run that is PENDING" in response.content.decode()
    assert status_of(run) == RunStatus.PENDING


def test_resume_asks_a_worker_to_check_a_blocked_runs_contract_again(console):
    run = blocked_v1()
    response = console.post(action_url(run, "resume"), confirmed("v1 is deployed again"))
    assert response.status_code == 302 and status_of(run) == RunStatus.PENDING
    assert operator_actions().get(run=run).source == "console"
    refused = console.post(action_url(run, "resume"), confirmed())
    assert refused.status_code == 409 and "Cannot resume a run that is PENDING" in refused.content.decode()


def test_migrate_offers_the_versions_that_declare_a_migration_and_moves_the_run(console, operator):
    run = blocked_v1("b")
    html = console.get(detail_url(run)).content.decode()
    assert '<select name="to_version" id="id_to_version">\n  <option value="2">v2</option>\n\n</select>' in html
    response = console.post(action_url(run, "migrate"), confirmed("v2 is out", to_version="2"))
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.workflow_version, run.current_step) == (RunStatus.PENDING, 2, "risk")
    action = operator_actions().get(run=run)
    assert (action.actor, action.action, action.source) == (operator, "migrate_version", "console")


def test_a_migration_that_maps_no_step_for_the_runs_position_is_refused(console):
    run = blocked_v1("c")
    response = console.post(action_url(run, "migrate"), confirmed(to_version="2"))
    assert response.status_code == 409 and "maps no step for this run&#x27;s position" in response.content.decode()
    run.refresh_from_db()
    assert (run.status, run.workflow_version) == (RunStatus.BLOCKED_VERSION, 1)


def test_a_version_without_a_declared_migration_is_not_offered_nor_accepted(console):
    run = blocked_v1()
    response = console.post(action_url(run, "migrate"), confirmed(to_version="1"))
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    trivial = run_in(RunStatus.BLOCKED_VERSION)  # test-trivial has no second version
    html = console.get(detail_url(trivial)).content.decode()
    assert action_url(trivial, "migrate") not in html and action_url(trivial, "resume") in html


# Who may act, and which buttons show


def test_buttons_follow_the_runs_status(console):
    for status, offered in ((RunStatus.PENDING, {"cancel"}), (RunStatus.FAILED, {"retry"}),
                            (RunStatus.WAITING_RETRY, {"cancel", "retry"}),
                            (RunStatus.BLOCKED_VERSION, {"cancel", "resume"}), (RunStatus.SUCCEEDED, set())):
        run = run_in(status)
        html = console.get(detail_url(run)).content.decode()
        shown = {name for name in ("cancel", "retry", "resume", "migrate") if action_url(run, name) in html}
        assert shown == offered, status


def test_a_user_without_the_permission_sees_no_button_and_is_forbidden(viewer):
    run = run_in(RunStatus.WAITING_RETRY)
    html = viewer.get(detail_url(run)).content.decode()
    assert action_url(run, "cancel") not in html and action_url(run, "retry") not in html
    assert "Nothing you may do to the run in this status." in html
    for name in ("cancel", "retry"):
        assert viewer.post(action_url(run, name), confirmed()).status_code == 403
    assert status_of(run) == RunStatus.WAITING_RETRY and not operator_actions().exists()


def test_one_permission_offers_only_its_action():
    run = run_in(RunStatus.WAITING_RETRY)
    client = client_for(make_user("canceller", VIEW, "durable.cancel_run"))
    html = client.get(detail_url(run)).content.decode()
    assert action_url(run, "cancel") in html and action_url(run, "retry") not in html
    assert client.post(action_url(run, "retry"), confirmed()).status_code == 403


def test_anonymous_actions_are_sent_to_log_in_and_change_nothing():
    run = run_in(RunStatus.PENDING)
    response = Client().post(action_url(run, "cancel"), confirmed())
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert status_of(run) == RunStatus.PENDING


def test_actions_only_accept_post(console):
    run = run_in(RunStatus.PENDING)
    assert console.get(action_url(run, "cancel")).status_code == 405
