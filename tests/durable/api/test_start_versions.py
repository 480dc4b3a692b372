"""New runs start on the current version (invariant 12, docs/invariants.md): the attack that skipped an approval."""
import pytest

from durable import services
from durable.errors import Forbidden, InvalidInput
from durable.models import Run
from tests.audit import operator_actions
from tests.conftest import client_for, make_user
from tests.endpoints import assert_one_refusal_logged, security_log_mark

pytestmark = pytest.mark.django_db

RUNS = "/api/runs/"
CLAIM = {"workflow": "claims-agent", "business_key": "ORD-1002",
         "input": {"order_id": "ORD-1002", "customer_message": "please refund ORD-1002"}}


@pytest.fixture
def intake(db):
    return make_user("intake", "durable.start_run", "durable.view_run")


def test_the_intake_service_cannot_start_v1_which_has_no_approval_step(intake):
    mark = security_log_mark()
    answer = client_for(intake).post(RUNS, {**CLAIM, "version": 1}, format="json")
    assert answer.status_code == 403
    assert_one_refusal_logged(mark, username="intake", path=RUNS, action="start_older_version",
                              says="claims-agent v1 only finishes the runs pinned to it")
    assert "claims-agent v1 only finishes the runs pinned to it" in answer.data["detail"]
    assert "v2" in answer.data["detail"]
    assert not Run.objects.exists()


def test_leaving_the_version_out_or_naming_the_current_one_starts_the_current_version(intake):
    assert client_for(intake).post(RUNS, CLAIM, format="json").data["workflow_version"] == 2
    again = client_for(intake).post(RUNS, {**CLAIM, "business_key": "ORD-1003", "version": 2}, format="json")
    assert again.status_code == 201 and again.data["workflow_version"] == 2


def test_an_unregistered_version_is_a_400_on_version(intake):
    answer = client_for(intake).post(RUNS, {**CLAIM, "version": 9}, format="json")
    assert answer.status_code == 400 and "no registered version 9" in str(answer.data["version"])
    assert not Run.objects.exists()


def test_starting_an_older_version_with_the_permission_is_audited_with_its_reason():
    starter = make_user("release-manager", "durable.start_run", "durable.view_run", "durable.start_older_version")
    answer = client_for(starter).post(RUNS, {**CLAIM, "version": 1, "reason": "re-run under the old policy"},
                                      format="json")
    assert answer.status_code == 201 and answer.data["workflow_version"] == 1
    action = operator_actions().get(action="start_older_version")
    assert (action.actor_username, action.reason, str(action.run_id)) == (
        "release-manager", "re-run under the old policy", answer.data["id"])
    assert action.detail == {"version": 1, "current_version": 2}


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_starting_an_older_version_without_a_reason_is_a_400_on_reason(reason):
    starter = make_user("release-manager", "durable.start_run", "durable.view_run", "durable.start_older_version")
    body = {**CLAIM, "version": 1, **({} if reason is None else {"reason": reason})}
    answer = client_for(starter).post(RUNS, body, format="json")
    assert answer.status_code == 400 and "needs a reason" in str(answer.data["reason"])
    assert not Run.objects.exists() and not operator_actions().exists()


def test_the_service_itself_holds_the_rule_for_every_caller(intake):
    with pytest.raises(Forbidden):
        services.start_run(user=intake, version=1, **CLAIM)
    with pytest.raises(Forbidden):  # nor may the machine, unless an in-process tool says so explicitly
        services.start_run(user=None, version=1, **CLAIM)
    with pytest.raises(InvalidInput):
        services.start_run(user=intake, version=0, **CLAIM)
    run, _ = services.start_run(user=None, version=1, allow_older_version=True, source="command", **CLAIM)
    assert run.workflow_version == 1


def test_no_role_grants_starting_an_older_version():
    from durable.roles import ROLES

    assert all("durable.start_older_version" not in perms for perms in ROLES.values())
