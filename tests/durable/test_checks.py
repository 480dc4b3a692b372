"""The launch checks (`manage.py check --tag durable`): each one made to fire, and kept quiet.

The crafted workflows and adapters here are never registered: the checks' inner functions
take what they inspect as an argument. Their steps are never run, only read.
"""
from __future__ import annotations

import functools
import inspect
import random
import time
import uuid
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core import checks as django_checks
from django.core.management import call_command
from django.utils import timezone
from pydantic import BaseModel

from durable import checks, downstream
from durable.checks import (
    check_approvals,
    check_call_timeout,
    check_client_retries,
    check_crash_settlement,
    check_declared_versions,
    check_drills,
    check_error_classification,
    check_side_effect_keys,
    check_sweeping,
)
from durable.engine.errors import Classification, classify
from durable.engine.ledger import Capabilities
from durable.models import DrillRecord
from durable.registry import registry
from durable.tools.demo import downstreams as demo_downstreams
from durable.tools.demo.claims_agent import claims_agent, claims_agent_v2
from durable.tools.demo.refund_checks import revalidate_refund
from durable.tools.demo.support_agent import support_agent
from durable.tools.faults import FAULT_POINTS
from durable.workflow import Workflow

payments = demo_downstreams.payments
DEMO_WORKFLOWS = [claims_agent, claims_agent_v2, support_agent]
DEMO_DOWNSTREAMS = [demo_downstreams.payments, demo_downstreams.tickets, demo_downstreams.notifications]
RELEASES = {"tool_catalog_version": "tools-1", "prompt_release": "prompts-1", "model_policy_version": "policy-1"}


class State(BaseModel):
    order_id: str = "ORD-1"
    refund: dict[str, Any] | None = None
    approval: dict[str, Any] | None = None


def workflow(*steps: Any, side_effects: tuple[str, ...] = ("refund",), version: int = 1, **options: Any) -> Workflow:
    wf = Workflow(name="crafted", version=version, state=State, input=State, **{**RELEASES, **options})
    for fn in steps:
        wf.step(fn, side_effects=side_effects)
    return wf


def ids(messages: list[django_checks.CheckMessage]) -> list[str]:
    return [m.id for m in messages]


# -- steps, as agent developers might write them ----------------------------


def keyed_by_order(ctx: Any, state: State) -> State:
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=payments, payload={})
    return state


def keyed_by_recorded_uuid(ctx: Any, state: State) -> State:
    key = ctx.activity("new_key", lambda: str(uuid.uuid4()))  # recorded: the same value on every replay
    state.refund = ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def keyed_by_uuid(ctx: Any, state: State) -> State:
    state.refund = ctx.side_effect("refund", business_key=str(uuid.uuid4()), downstream=payments, payload={})
    return state


def keyed_by_clock_through_a_name(ctx: Any, state: State) -> State:
    stamp = f"{state.order_id}-{time.time()}"
    key = stamp.lower()
    state.refund = ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def keyed_by_now_and_dice(ctx: Any, state: State) -> State:
    key = f"{timezone.now():%Y%m%d}-{datetime.now():%H}-{random.randint(1, 6)}"
    state.refund = ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def without_key(ctx: Any, state: State) -> State:
    options: dict[str, Any] = {"downstream": payments, "payload": {}}
    state.refund = ctx.side_effect("refund", **options)
    return state


def asks_properly(ctx: Any, state: State) -> State:
    state.approval = ctx.request_approval("refund", snapshot={}, approve={}, revalidate=revalidate_refund,
                                          expires_in=timedelta(days=3))
    return state


def asks_without_expiry(ctx: Any, state: State) -> State:
    options: dict[str, Any] = {"expires_in": timedelta(days=3)}
    state.approval = ctx.request_approval("refund", snapshot={}, approve={}, revalidate=revalidate_refund, **options)
    return state


def asks_without_revalidation(ctx: Any, state: State) -> State:
    state.approval = ctx.request_approval("refund", snapshot={}, approve={}, revalidate=None,
                                          expires_in=timedelta(days=3))
    return state


# -- durable.E002 / E003 / E004 / W005: side effects and their business keys ---------


def test_the_shipped_demo_keys_every_side_effect_by_its_order():
    assert check_side_effect_keys(DEMO_WORKFLOWS) == []


@pytest.mark.parametrize("step", [keyed_by_order, keyed_by_recorded_uuid])
def test_a_key_from_the_state_or_a_recorded_activity_is_stable(step):
    assert check_side_effect_keys([workflow(step)]) == []


@pytest.mark.parametrize("step, culprits", [
    (keyed_by_uuid, "uuid.uuid4"),
    (keyed_by_clock_through_a_name, "time.time"),
    (keyed_by_now_and_dice, "datetime.now, random.randint, timezone.now"),
])
def test_a_random_or_time_based_business_key_is_an_error(step, culprits):
    [error] = check_side_effect_keys([workflow(step)])
    assert error.id == "durable.E003" and error.level == django_checks.ERROR
    assert f"built with {culprits}()" in error.msg
    assert error.obj == f"crafted v1 step {step.__name__!r}"
    line = next(n for n, text in enumerate(inspect.getsource(step).splitlines()) if "ctx.side_effect" in text)
    assert f"tests/durable/test_checks.py:{step.__code__.co_firstlineno + line}" in error.msg
    assert "ctx.activity" in error.hint


def keyed_by_each_tool_call(ctx: Any, state: State) -> State:
    results = {}
    for c in [{"id": state.order_id}]:
        results[c["id"]] = {"at": timezone.now().isoformat()}  # the container changes; `c` is not assigned
        state.refund = ctx.side_effect("refund", business_key=c["id"], downstream=payments, payload=results)
    return state


def keyed_by_clock_on_one_path(ctx: Any, state: State) -> State:
    key = state.order_id or str(uuid.uuid4())
    state.refund = ctx.side_effect("refund", business_key=key, downstream=payments, payload={})
    return state


def test_a_clock_stamped_result_stored_under_a_calls_id_does_not_touch_its_key():
    assert check_side_effect_keys([workflow(keyed_by_each_tool_call)]) == []


def test_a_key_the_clock_may_reach_on_some_path_is_a_warning_naming_the_line():
    [warning] = check_side_effect_keys([workflow(keyed_by_clock_on_one_path)])
    assert warning.id == "durable.W003" and warning.level == django_checks.WARNING
    line = keyed_by_clock_on_one_path.__code__.co_firstlineno + 1
    assert f"may be built with uuid.uuid4() at line {line}:" in warning.msg
    assert "docs/operations.md#launch-checklist" in warning.hint


def test_a_side_effect_without_a_business_key_by_name_is_an_error():
    [error] = check_side_effect_keys([workflow(without_key)])
    assert error.id == "durable.E002" and "passes no business_key by name" in error.msg and "**kwargs" in error.msg


def test_a_side_effect_the_step_does_not_declare_is_an_error():
    [error] = check_side_effect_keys([workflow(keyed_by_order, side_effects=("charge",))])
    assert error.id == "durable.E004" and "declares only 'charge'" in error.msg
    assert "side_effects=[...]" in error.hint


def sms_from_v2(ctx: Any, state: State) -> State:
    state.refund = ctx.side_effect("refund", business_key=state.order_id, downstream=payments, payload={})
    if ctx.workflow_version >= 2:  # one step's code, registered on v1 (no sms) and v2 (declares it)
        ctx.side_effect("sms", business_key=state.order_id, downstream=payments, payload={})
    return state


def sms_behind_a_patch(ctx: Any, state: State) -> State:
    if ctx.patched("sms-notice"):
        ctx.side_effect("sms", business_key=state.order_id, downstream=payments, payload={})
    return state


def test_a_step_shared_by_two_versions_is_checked_on_the_calls_each_version_can_run():
    assert check_side_effect_keys([workflow(sms_from_v2, version=1),
                                   workflow(sms_from_v2, version=2, side_effects=("refund", "sms"))]) == []
    [error] = check_side_effect_keys([workflow(sms_from_v2, version=2)])
    assert error.id == "durable.E004" and "'sms'" in error.msg


def test_a_new_side_effect_behind_a_patch_must_still_be_declared_and_the_hint_says_how_to_share_the_step():
    [error] = check_side_effect_keys([workflow(sms_behind_a_patch)])
    assert error.id == "durable.E004" and "ctx.workflow_version >= N" in error.hint
    assert check_side_effect_keys([workflow(sms_behind_a_patch, side_effects=("sms",))]) == []


def test_a_step_whose_source_cannot_be_read_is_a_warning():
    wf = workflow()
    wf.step(functools.partial(keyed_by_order), name="partial")
    assert ids(check_side_effect_keys([wf])) == ids(check_approvals([wf])) == ["durable.W005"]
    assert "could not be checked" in check_side_effect_keys([wf])[0].msg


# -- durable.E006: approvals declare revalidation and expiry -------------------------


def test_the_shipped_demo_approval_declares_revalidation_and_expiry():
    assert check_approvals(DEMO_WORKFLOWS) == []
    assert check_approvals([workflow(asks_properly)]) == []


@pytest.mark.parametrize("step, missing", [(asks_without_expiry, "expires_in"),
                                           (asks_without_revalidation, "revalidate")])
def test_an_approval_without_revalidation_or_expiry_is_an_error(step, missing):
    [error] = check_approvals([workflow(step)])
    assert error.id == "durable.E006" and f"does not declare {missing}:" in error.msg


# -- durable.E007 / E008 / W009: what downstream adapters declare --------------------


class Adapter:
    """A downstream adapter declaring whatever a test gives it."""

    def __init__(self, capabilities: Capabilities | None = None, **declared: Any):
        self.name = "crafted"
        self.capabilities = capabilities or Capabilities(honours_idempotency_keys=True)
        for attribute, value in declared.items():
            setattr(self, attribute, value)


def test_the_shipped_demo_downstreams_declare_everything():
    assert check_crash_settlement(DEMO_DOWNSTREAMS) == []
    assert check_client_retries(DEMO_DOWNSTREAMS) == []
    assert check_error_classification(DEMO_DOWNSTREAMS) == []
    assert demo_downstreams.notifications.capabilities.unknown_on_crash


@pytest.mark.parametrize("capabilities", [Capabilities(honours_idempotency_keys=True), Capabilities(can_lookup=True),
                                          Capabilities(unknown_on_crash=True)])
def test_keys_a_lookup_or_declared_unknown_settle_a_crash(capabilities):
    assert check_crash_settlement([Adapter(capabilities)]) == []


def test_a_downstream_that_says_nothing_about_crashes_is_an_error():
    [error] = check_crash_settlement([Adapter(Capabilities())])
    assert (error.id, error.obj) == ("durable.E007", "downstream 'crafted'") and "unknown_on_crash=True" in error.hint


@pytest.mark.parametrize("declared, problem", [({}, "does not declare client_retries"),
                                               ({"client_retries": 3}, "declares client_retries=3"),
                                               ({"client_retries": None}, "does not declare client_retries")])
def test_a_downstream_whose_client_may_retry_on_its_own_is_an_error(declared, problem):
    [error] = check_client_retries([Adapter(**declared)])
    assert error.id == "durable.E008" and problem in error.msg and "retries=0" in error.hint


def test_a_downstream_with_its_client_retries_off_is_quiet():
    assert check_client_retries([Adapter(client_retries=0)]) == []


def test_a_downstream_without_its_own_error_classification_is_a_warning():
    [warning] = check_error_classification([Adapter()])
    assert warning.id == "durable.W009" and warning.level == django_checks.WARNING


def test_a_downstream_that_classifies_its_errors_is_quiet_and_its_classification_is_used():
    declined = Classification(False, "business_rejection", "card declined", "x")
    adapter = Adapter(classify=lambda exc: declined)
    assert check_error_classification([adapter]) == []
    assert downstream.classify_error(adapter, RuntimeError("402")) is declined
    assert downstream.classify_error(Adapter(), TimeoutError()) == classify(TimeoutError())  # durable's rules


# -- durable.W010: workflows declare their versions -----------------------------------


def test_the_shipped_demo_declares_its_releases():
    assert check_declared_versions(DEMO_WORKFLOWS) == []


def test_a_workflow_without_its_releases_or_a_version_is_a_warning():
    bare = Workflow(name="bare", version=0, state=State, input=State, prompt_release="p1")
    [warning] = check_declared_versions([bare])
    assert (warning.id, warning.obj) == ("durable.W010", "bare v0")
    assert "does not declare tool_catalog_version, model_policy_version, version >= 1:" in warning.msg


# -- durable.E014: a call's timeout is well under the lease ---------------------------


@pytest.mark.parametrize("http_timeout, lease", [(5, 60), (30, 60), (1, 2)])
def test_a_timeout_at_most_half_the_lease_is_quiet(http_timeout, lease):
    assert check_call_timeout(http_timeout, lease) == []


@pytest.mark.parametrize("http_timeout, lease", [(12, 6), (31, 60), (5, 2)])
def test_a_timeout_not_well_under_the_lease_is_an_error_naming_both_settings(http_timeout, lease):
    [error] = check_call_timeout(http_timeout, lease)
    assert error.id == "durable.E014" and error.level == django_checks.ERROR
    assert f"DURABLE_HTTP_TIMEOUT_SECONDS ({http_timeout:g}s)" in error.msg
    assert f"DURABLE_LEASE_SECONDS ({lease:g}s)" in error.msg
    assert "DURABLE_HTTP_TIMEOUT_SECONDS" in error.hint and "DURABLE_LEASE_SECONDS" in error.hint


def test_the_registered_check_reads_the_settings(settings):
    settings.DURABLE_LEASE_SECONDS, settings.DURABLE_HTTP_TIMEOUT_SECONDS = 6, 12  # the setup
    assert "durable.E014" in ids(django_checks.run_checks(tags=[checks.DURABLE]))
    settings.DURABLE_HTTP_TIMEOUT_SECONDS = 3
    assert "durable.E014" not in ids(django_checks.run_checks(tags=[checks.DURABLE]))


def test_the_drill_s_short_lease_keeps_its_calls_within_it():
    from durable.tools.drill import DRILL_ENV

    assert check_call_timeout(float(DRILL_ENV["DURABLE_HTTP_TIMEOUT_SECONDS"]),
                              float(DRILL_ENV["DURABLE_LEASE_SECONDS"])) == []


# -- durable.W011: the newest version has passed a fault drill ------------------------


def drilled(wf: Workflow, **changes: Any) -> DrillRecord:
    now = timezone.now()
    fields = {"workflow_name": wf.name, "workflow_version": wf.version, "topology_fingerprint": wf.fingerprint,
              "points": list(FAULT_POINTS), "actions": ["refund"], "runs": 12, "violations": [], "passed": True,
              "started_at": now - timedelta(minutes=5), "finished_at": now, **changes}
    return DrillRecord.objects.create(**fields)


@pytest.mark.django_db
def test_a_newest_version_never_drilled_is_a_warning_naming_the_command():
    v1, v2 = workflow(keyed_by_order), workflow(keyed_by_order, version=2)
    drilled(v1)
    [warning] = check_drills([v1, v2])
    assert (warning.id, warning.obj) == ("durable.W011", "crafted v2")
    assert "(it was never drilled)" in warning.msg
    assert "durable_drill --workflow crafted --workflow-version 2 --actions refund" in warning.hint
    # Pointed at production, the drill is safe to run only because it touches nothing but its own runs.
    assert "touches only what it creates" in warning.hint and "docs/fault-drill.md" in warning.hint


@pytest.mark.django_db
def test_a_passing_full_drill_of_the_current_steps_keeps_it_quiet():
    wf = workflow(keyed_by_order)
    drilled(wf)
    assert check_drills([wf]) == []
    assert check_drills([workflow(asks_properly, side_effects=())]) == []  # nothing to duplicate: no drill needed


@pytest.mark.django_db
@pytest.mark.parametrize("changes, note", [
    ({"passed": False, "violations": ["after_commit-refund: 1 run(s) lost"]}, "failed: after_commit-refund"),
    ({"topology_fingerprint": "0" * 64}, "ran on other steps"),
    ({"points": ["after_prepare"]}, "armed only after_prepare in refund"),
])
def test_a_failed_outdated_or_partial_drill_does_not_count(changes, note):
    wf = workflow(keyed_by_order)
    drilled(wf, **changes)
    [warning] = check_drills([wf])
    assert warning.id == "durable.W011" and note in warning.msg


@pytest.mark.django_db
def test_a_version_that_waits_for_a_human_is_told_to_run_the_drill_which_approves_as_its_own_account():
    [warning] = check_drills([claims_agent_v2])
    assert "durable_drill --workflow claims-agent --workflow-version 2 --actions notify,refund,ticket" in warning.hint
    assert "approvals they ask for are decided by another of its own" in warning.hint
    drilled(claims_agent_v2, actions=["notify", "refund", "ticket"])
    assert check_drills([claims_agent_v2]) == []  # a passing drill of it clears it, as for any version


# -- registered: `check --tag durable`, `check --deploy` -------------------------------


@pytest.fixture
def shipped(monkeypatch):
    """Only what the product ships is registered (the test process registers test workflows too)."""
    monkeypatch.setattr(registry, "_by_key", {(wf.name, wf.version): wf for wf in DEMO_WORKFLOWS})
    monkeypatch.setattr(downstream, "_downstreams", {d.name: d for d in DEMO_DOWNSTREAMS})


def durable_messages(*args: str) -> str:
    err = StringIO()
    call_command("check", *args, stdout=StringIO(), stderr=err)
    return err.getvalue()


@pytest.mark.django_db
def test_check_tag_durable_on_the_shipped_demo_reports_only_its_undrilled_newest_versions(shipped):
    out = durable_messages("--tag", "durable", "--database", "default")
    assert "durable.W011" in out and "claims-agent v2" in out and "support-agent v1" in out
    assert "durable.E" not in out and out.count("(durable.") == 2
    assert durable_messages("--tag", "durable") == ""  # without a database, nothing is read from it


@pytest.mark.django_db
def test_check_deploy_runs_the_launch_checks_too(shipped, monkeypatch):
    monkeypatch.setitem(downstream._downstreams, "crafted", Adapter(Capabilities(), client_retries=0,
                                                                     classify=classify))
    messages = django_checks.run_checks(include_deployment_checks=True, databases=["default"])
    assert {"durable.E007", "durable.W011"} <= set(ids(messages))
    assert {"durable.E007", "durable.W011"} <= set(ids(django_checks.run_checks(tags=[checks.DURABLE],
                                                                                databases=["default"])))


@pytest.mark.django_db
def test_a_host_project_without_the_tools_app_is_asked_for_the_drill_it_can_run_under_the_drill_settings(shipped):
    from django.test import modify_settings

    with modify_settings(INSTALLED_APPS={"remove": ["durable.tools"]}):
        warnings = checks.newest_versions_drilled(databases=["default"])
    assert ids(warnings) == ["durable.W011", "durable.W011"]
    for warning in warnings:  # the command as a host runs it, not the standalone project's (docs/fault-drill.md)
        assert f"DURABLE_DRILL_SETTINGS={django_settings.SETTINGS_MODULE} python manage.py durable_drill" in warning.hint
        assert "--settings durable.tools.drill_settings --target" in warning.hint
        assert "#drilling-a-host-projects-workflows" in warning.hint


def test_w016_warns_when_nothing_will_sweep_and_names_what_to_turn_on():
    assert check_sweeping(True, set()) == []  # the default: every worker sweeps in turn
    assert check_sweeping(False, {"durable.sweep"}) == []  # beat sweeps instead
    (warning,) = check_sweeping(False, {"durable.prune"})
    assert warning.id == "durable.W016" and "DURABLE_WORKER_SWEEPS" in warning.hint
    assert "docs/operations.md" in warning.hint


def test_w016_reads_the_projects_beat_schedule(settings):
    settings.DURABLE_WORKER_SWEEPS = False
    settings.CELERY_BEAT_SCHEDULE = {}
    assert "durable.W016" in ids(checks.something_sweeps())
    settings.CELERY_BEAT_SCHEDULE = {"sweep": {"task": "durable.sweep", "schedule": 2.0}}
    assert checks.something_sweeps() == []


@pytest.mark.django_db
def test_w017_warns_when_the_live_processes_pools_add_up_past_the_servers_max_connections():
    from durable.models import Process

    now = timezone.now()
    for pid in range(3):  # three live workers with pools of 40; a fourth, long gone, is not counted
        Process.objects.create(kind="worker", hostname="box", pid=pid, started_at=now, last_seen=now, db_connections=40)
    Process.objects.create(kind="worker", hostname="box", pid=9, started_at=now, last_seen=now - timedelta(days=1),
                           db_connections=40)
    (warning,) = checks.pools_fit_the_server(databases=["default"])  # the test server allows 100
    assert warning.id == "durable.W017" and "120 database connections" in warning.msg
    assert "DURABLE_DB_POOL_SIZE" in warning.hint
    Process.objects.filter(pid=2).delete()
    assert checks.pools_fit_the_server(databases=["default"]) == []  # 80 fit
    assert checks.pools_fit_the_server() == []  # without a database, nothing is read from it


# -- durable.E045: DURABLE_LIMITS (docs/workflows.md, "Limits and priority") ---------------------------------------

def test_limits_declared_rightly_pass_the_check():
    assert checks.check_limits({"openai": {"concurrency": 50, "rate": "500/m", "tokens": "200000/m", "per": None},
                                "per-customer": {"concurrency": 3, "per": "business_key"}}) == []


def test_a_limit_declared_wrongly_is_an_error_naming_the_limit_and_the_field(settings):
    settings.DURABLE_LIMITS = {"openai": {"rate": "500 a minute"}, "fine": {"concurrency": 1},
                               "per-tenant": {"concurrency": 2, "per": "tenant"}}
    found = [message for message in django_checks.run_checks(tags=["durable"]) if message.id == "durable.E045"]
    assert [message.obj for message in found] == ["DURABLE_LIMITS['openai']", "DURABLE_LIMITS['per-tenant']"]
    assert "limit 'openai', field 'rate'" in found[0].msg and "limit 'per-tenant', field 'per'" in found[1].msg


def test_durable_limits_that_is_not_a_dict_is_named_by_the_settings_check(settings):
    settings.DURABLE_LIMITS = ["openai"]
    ids = {message.id for message in django_checks.run_checks(tags=["durable"]) if "DURABLE_LIMITS" in message.msg}
    assert ids == {"durable.E015"}


# -- durable.E055 / W055: DURABLE_STREAM_TRANSPORT (docs/operations.md, "Streams") ----------------------------------

def test_each_stream_transport_passes_the_check_and_notify_on_sqlite_is_a_warning_it_polls():
    assert [checks.check_stream_transport(t, "postgresql") for t in ("auto", "poll", "notify")] == [[], [], []]
    assert checks.check_stream_transport("auto", "sqlite") == []
    found = checks.check_stream_transport("notify", "sqlite")
    assert [m.id for m in found] == ["durable.W055"] and "poll instead" in found[0].msg


@pytest.mark.parametrize("given", ["redis", "NOTIFY", "", None, 1])
def test_a_stream_transport_that_is_none_of_them_is_an_error_naming_the_setting(settings, given):
    settings.DURABLE_STREAM_TRANSPORT = given
    found = [message for message in django_checks.run_checks(tags=["durable"]) if message.id == "durable.E055"]
    assert len(found) == 1 and found[0].obj == "DURABLE_STREAM_TRANSPORT" and repr(given) in found[0].msg
