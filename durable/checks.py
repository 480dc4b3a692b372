"""The pre-launch checklist as system checks: `manage.py check --tag durable`, also run by `check --deploy`.

Each check is registered as an ordinary check tagged "durable", not with `deploy=True`:
Django runs every ordinary check under `check --deploy` as well, whereas a deploy-only check
would stay silent under `check --tag durable` unless `--deploy` were given too. Ordinary
checks also run before `runserver` and `migrate`; reading a few step functions' source takes
milliseconds. The three checks that read the database also carry `Tags.database` and, as
Django's own database checks do, run only when the command names a database:
`check --tag durable --database default`.

Errors are what must block a launch (an operation that could happen twice, or a step that
would fail on its first run); warnings are what someone should look at before launching.
Each registered check hands the registry to a function that takes what it inspects as an
argument, so tests can check a crafted workflow or adapter without registering it.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError

from durable.conf import durable_settings, problem
from durable.downstream import Downstream, all_downstreams
from durable.engine.step_source import REQUEST_APPROVAL, SIDE_EFFECT, Call, SourceUnavailable, StepSource, read_step
from durable.registry import registry
from durable.workflow import Step, Workflow

DURABLE = "durable"
RELEASES = ("tool_catalog_version", "prompt_release", "model_policy_version")


# -- the registered checks: each inspects what this process has registered ----------


@register(DURABLE)
def side_effects_have_stable_keys(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_side_effect_keys(registry.all())


@register(DURABLE)
def approvals_declare_revalidation_and_expiry(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_approvals(registry.all())


@register(DURABLE)
def downstreams_say_how_crashes_settle(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_crash_settlement(all_downstreams())


@register(DURABLE)
def downstream_clients_do_not_retry(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_client_retries(all_downstreams())


@register(DURABLE)
def downstreams_classify_errors(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_error_classification(all_downstreams())


@register(DURABLE)
def workflow_modules_import(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_workflow_imports(registry.import_failures)


@register(DURABLE)
def workflows_declare_versions(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_declared_versions(registry.all())


@register(DURABLE)
def calls_end_within_the_lease(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if any(problem(name, getattr(durable_settings, name)) for name in ("DURABLE_HTTP_TIMEOUT_SECONDS", "DURABLE_LEASE_SECONDS")):
        return []  # durable.E015 names the setting of the wrong type
    return check_call_timeout(durable_settings.DURABLE_HTTP_TIMEOUT_SECONDS, durable_settings.DURABLE_LEASE_SECONDS)


@register(DURABLE)
def something_sweeps(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_sweeping(durable_settings.DURABLE_WORKER_SWEEPS, _beat_tasks())


@register(DURABLE)
def settings_are_valid(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_settings(settings)


@register(DURABLE)
def limits_are_declared_rightly(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return check_limits(durable_settings.DURABLE_LIMITS)


@register(DURABLE)
def stream_transport_is_known(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django.db import connection

    return check_stream_transport(durable_settings.DURABLE_STREAM_TRANSPORT, connection.vendor)


@register(Tags.security, DURABLE)
def logins_lock_out_by_username(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    from django.apps import apps

    return check_login_lockout(apps.is_installed("axes"), getattr(settings, "AXES_LOCKOUT_PARAMETERS", None))


@register(Tags.security, DURABLE, deploy=True)
def not_a_developers_machine(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    # Deploy-only, unlike the checks above: on the developer's machine `runserver` runs the ordinary checks, and
    # this one must not stop it there.
    return check_development(bool(durable_settings.DURABLE_DEVELOPMENT))


def check_development(development: bool) -> list[CheckMessage]:
    """durable.E050: DURABLE_DEVELOPMENT (plain HTTP, cookies without Secure) in settings `check --deploy` reads."""
    if not development:
        return []
    return [Error(
        "DURABLE_DEVELOPMENT is on: the console would be served over plain HTTP, its session and CSRF cookies sent "
        "without Secure and no HSTS asked for, so anyone on the network path could read a session. It is for a "
        "developer's machine, never for a deployment.",
        hint="Unset DURABLE_DEVELOPMENT (the environment variable, or the setting in your settings module) where "
             "the project is deployed, and serve it over HTTPS (docs/deploying.md).",
        obj="DURABLE_DEVELOPMENT", id="durable.E050")]


@register(Tags.database, DURABLE)
def unregistered_versions_in_flight(app_configs: Any = None, databases: Any = None,
                                    **kwargs: Any) -> list[CheckMessage]:
    if not databases:
        return []
    return check_versions_in_flight()


@register(Tags.database, DURABLE)
def newest_versions_drilled(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    # In a host project too: it runs the drill under durable.tools.drill_settings, against stand-ins of its own
    # downstreams (docs/fault-drill.md), so every project launching a workflow with side effects can clear it.
    if not databases:
        return []
    return check_drills(registry.all())


@register(Tags.database, DURABLE)
def pools_fit_the_server(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not databases:
        return []
    from django.db import connection

    from durable import fleet

    if connection.vendor != "postgresql":
        return []  # SQLite: a file, no connection limit
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW max_connections")
            max_connections = int(cursor.fetchone()[0])
        wanted = fleet.live_connections()
    except DatabaseError:  # not migrated yet, or away: Django's own checks say so
        return []
    return check_connections_budget(wanted, max_connections)


def check_connections_budget(wanted: int, max_connections: int) -> list[CheckMessage]:
    """durable.W017: the live processes' pools together may open more connections than the server allows."""
    if wanted <= max_connections:
        return []
    return [Warning(
        f"the live processes recorded in durable_process may open {wanted} database connections together (each its "
        f"pool's size), more than the server's max_connections of {max_connections}: once they all open theirs, "
        "new connections are refused, other clients' too",
        hint="Lower DURABLE_DB_POOL_SIZE, run fewer processes, raise the server's max_connections, or put PgBouncer "
             "in front (docs/operations.md, \"Connections\").",
        id="durable.W017")]


def check_stream_transport(transport: Any, vendor: str) -> list[CheckMessage]:
    """durable.E055: DURABLE_STREAM_TRANSPORT names a transport; durable.W055: `notify` on a database without it."""
    from durable.engine.streams import NOTIFY, TRANSPORTS

    if transport not in TRANSPORTS:
        return [Error(f"DURABLE_STREAM_TRANSPORT is {transport!r}, not a stream transport: web processes would not "
                      "know how to learn what the followed runs publish.",
                      hint=f"Set it to one of {', '.join(map(repr, TRANSPORTS))}, or unset it for 'auto' "
                           "(docs/operations.md, \"Streams\").", obj="DURABLE_STREAM_TRANSPORT", id="durable.E055")]
    if transport == NOTIFY and vendor != "postgresql":
        return [Warning(f"DURABLE_STREAM_TRANSPORT is 'notify' on {vendor}, which has no LISTEN/NOTIFY: web "
                        "processes poll instead (every DURABLE_STREAM_POLL_SECONDS).",
                        hint="Set it to 'auto' or 'poll' (docs/operations.md, \"Streams\").",
                        obj="DURABLE_STREAM_TRANSPORT", id="durable.W055")]
    return []


# -- side effects and approvals, read from each step's source ----------------------


def check_side_effect_keys(workflows: Iterable[Workflow]) -> list[CheckMessage]:
    """durable.E002/E003/E004, W003/W005: every side effect has a stable business key and is declared."""
    return _per_step(workflows, "business keys", _side_effect_messages)


def check_approvals(workflows: Iterable[Workflow]) -> list[CheckMessage]:
    """durable.E006, W005: every approval declares its revalidation and its expiry."""
    return _per_step(workflows, "approvals", _approval_messages)


StepMessages = Callable[[Step, StepSource, str], list[CheckMessage]]


def _per_step(workflows: Iterable[Workflow], what: str, messages: StepMessages) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    for workflow in workflows:
        for step in workflow.steps:
            obj = f"{workflow.name} v{workflow.version} step {step.name!r}"
            try:
                source = read_step(step.fn)
            except SourceUnavailable as exc:
                found.append(Warning(
                    f"The source of this step cannot be read ({exc}), so its {what} could not be checked.",
                    hint="Define each step as a function (def) in a module's source file "
                         "(docs/operations.md#launch-checklist).",
                    obj=obj, id="durable.W005"))
                continue
            found += messages(step, source.for_version(workflow.version), obj)
    return found


def _side_effect_messages(step: Step, source: StepSource, obj: str) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    for call in source.of_kind(SIDE_EFFECT):
        where = f"side effect {call.first or '?'!r} at {_where(source, call)}"
        if not call.passes("business_key"):
            through = " (it may be inside **kwargs, which cannot be read)" if call.passes_kwargs else ""
            found.append(Error(
                f"The {where} passes no business_key by name{through}: its operation id, and so its "
                "Idempotency-Key, cannot be shown to be the same when the step runs again.",
                hint="Pass business_key= in the call itself: the id of the business object the action is "
                     "about (an order id, a claim number), read from the run's input or state.",
                obj=obj, id="durable.E002"))
        elif call.unstable:
            found.append(Error(
                f"The business key of the {where} is built with {', '.join(sorted(set(call.unstable)))}(): it "
                "differs every time the step runs, so after a retry or a crash the ledger sees a new operation "
                "and the action happens twice.",
                hint="Build the key from the run's input or state. A value that must be generated is generated "
                     "once, in ctx.activity(...) or an earlier step, and kept in the state.",
                obj=obj, id="durable.E003"))
        elif call.suspects:
            built = ", ".join(f"{s.call}() at line {s.line}" for s in call.suspects)
            found.append(Warning(
                f"The business key of the {where} may be built with {built}: on some path through the step "
                "(a branch, a loop, a name given several values, a mutated list or dict, an attribute) a random "
                "or time-based value can reach it, and a key that differs when the step runs again makes the "
                "action happen twice.",
                hint="Check the line named. If the value can reach the key, build the key from the run's input "
                     "or state instead (a value that must be generated is generated once, in ctx.activity(...) or "
                     "an earlier step, and kept in the state); if it cannot (one name reused for two values), "
                     "give the random or time-based value a name of its own (docs/operations.md#launch-checklist).",
                obj=obj, id="durable.W003"))
        if call.first is not None and call.first not in step.side_effects:
            declared = f"only {', '.join(map(repr, step.side_effects))}" if step.side_effects else "none"
            found.append(Error(
                f"The step performs {where} but declares {declared}: the run would fail there "
                "(undeclared_side_effect).",
                hint=f"Add {call.first!r} to the step's side_effects=[...]; the declared side effects are part "
                     "of the topology fingerprint, so change them in a new workflow version"
                     + (" (ctx.patched changes code inside the graph, not the graph: a step shared by two versions "
                        "performs the new side effect under `if ctx.workflow_version >= N:`)" if call.patches else "")
                     + ".",
                obj=obj, id="durable.E004"))
    return found


def _approval_messages(step: Step, source: StepSource, obj: str) -> list[CheckMessage]:
    found: list[CheckMessage] = []
    for call in source.of_kind(REQUEST_APPROVAL):
        missing = [name for name in ("revalidate", "expires_in") if not call.passes(name)]
        if not missing:
            continue
        why = {"revalidate": "the run would act without re-reading the facts the approver saw",
               "expires_in": "the request could wait forever"}
        found.append(Error(
            f"The approval {call.first or '?'!r} at {_where(source, call)} does not declare "
            f"{' or '.join(missing)}: {'; '.join(why[name] for name in missing)}.",
            hint="Pass revalidate= (a module-level function that re-reads the business preconditions) and "
                 "expires_in= (a timedelta) by name in the call; on_invalid= and on_expiry= say what happens then.",
            obj=obj, id="durable.E006"))
    return found


def _where(source: StepSource, call: Call) -> str:
    """`durable/tools/demo/claims_agent.py:93`: relative to the project when the step lives in it."""
    base = str(getattr(settings, "BASE_DIR", os.getcwd())) + os.sep  # a host project may have no BASE_DIR
    path = source.filename[len(base):] if source.filename.startswith(base) else source.filename
    return f"{path}:{call.line}"


# -- downstream adapters -----------------------------------------------------------


def check_crash_settlement(downstreams: Iterable[Downstream]) -> list[CheckMessage]:
    """durable.E007: every downstream says what settles a crash mid-call."""
    return [Error(
        f"Downstream {d.name!r} neither honours idempotency keys nor can be looked up, and does not declare "
        "that its crashes go to UNKNOWN.",
        hint="Declare it in its Capabilities: honours_idempotency_keys=True if it deduplicates on the "
             "Idempotency-Key; can_lookup=True with a lookup(); otherwise unknown_on_crash=True, so that "
             "operators know they will settle its UNKNOWN operations by hand.",
        obj=f"downstream {d.name!r}", id="durable.E007",
    ) for d in downstreams if not d.capabilities.settles_crashes]


def check_client_retries(downstreams: Iterable[Downstream]) -> list[CheckMessage]:
    """durable.E008: every downstream's own HTTP client or SDK has its retries off."""
    found: list[CheckMessage] = []
    for d in downstreams:
        retries = getattr(d, "client_retries", None)
        if type(retries) is int and retries == 0:
            continue
        problem = (f"declares client_retries={retries}: its client sends again on its own" if type(retries) is int
                   else "does not declare client_retries: its client may send again on its own")
        found.append(Error(
            f"Downstream {d.name!r} {problem}, outside the ledger and beside durable's retry policy.",
            hint="Build its client with retries off (httpx.HTTPTransport(retries=0), the OpenAI SDK's "
                 "max_retries=0) and declare client_retries = 0 on the adapter.",
            obj=f"downstream {d.name!r}", id="durable.E008"))
    return found


def check_error_classification(downstreams: Iterable[Downstream]) -> list[CheckMessage]:
    """durable.W009: every downstream says which of its errors are worth retrying."""
    return [Warning(
        f"Downstream {d.name!r} has no classify(exc): whether its errors are retried is left to durable's "
        "generic HTTP rules.",
        hint="Add classify(self, exc) -> Classification to the adapter: delegate to durable.classify (HTTP "
             "statuses, timeouts, errors carrying retryable=) and mark its business rejections non-retryable "
             "(docs/ledger-and-reconciliation.md#writing-a-downstream-adapter).",
        obj=f"downstream {d.name!r}", id="durable.W009",
    ) for d in downstreams if not callable(getattr(d, "classify", None))]


# -- the lease and the calls made under it -----------------------------------------


def check_call_timeout(http_timeout: float, lease_seconds: float) -> list[CheckMessage]:
    """durable.E014: a call's timeout is well under the lease (at most half of it).

    The heartbeat (durable.runtime.heartbeat) renews the lease while a call is in flight; if it cannot
    (the database unreachable), the lease renewed as the call began must still outlast the call,
    or a second worker could take the run and send while the first request may be in flight.
    """
    if http_timeout <= lease_seconds / 2:
        return []
    return [Error(
        f"DURABLE_HTTP_TIMEOUT_SECONDS ({http_timeout:g}s) is not well under DURABLE_LEASE_SECONDS "
        f"({lease_seconds:g}s): a call may still be in flight when its run's lease runs out, should the "
        "heartbeat fail to renew it, and then a second worker would call again.",
        hint=f"Keep DURABLE_HTTP_TIMEOUT_SECONDS at most half of DURABLE_LEASE_SECONDS: lower the timeout to "
             f"{lease_seconds / 2:g}s or less, or raise the lease to {http_timeout * 2:g}s or more.",
        obj="DURABLE_HTTP_TIMEOUT_SECONDS", id="durable.E014")]


# -- workflow versions -------------------------------------------------------------


def check_declared_versions(workflows: Iterable[Workflow]) -> list[CheckMessage]:
    """durable.W010: every workflow declares its version and the releases its runs are pinned to."""
    found: list[CheckMessage] = []
    for wf in workflows:
        missing = [name for name in RELEASES if not str(getattr(wf, name) or "").strip()]
        missing += [f"{name} >= 1" for name in ("version", "checkpoint_schema_version") if getattr(wf, name) < 1]
        if missing:
            found.append(Warning(
                f"The workflow does not declare {', '.join(missing)}: its runs cannot record what tools, "
                "prompts and model policy they ran under, nor be held to them when a deploy changes one.",
                hint="Declare them on the Workflow(...): tool_catalog_version=, prompt_release=, "
                     "model_policy_version= (the releases it runs under; a workflow with no LLM names its own "
                     "rules' release, or \"none\"), and a version from 1 (docs/workflows.md#releases).",
                obj=f"{wf.name} v{wf.version}", id="durable.W010"))
    return found


def check_workflow_imports(failures: dict[str, str]) -> list[CheckMessage]:
    """durable.E012: every module named in DURABLE_WORKFLOW_MODULES imports."""
    return [
        Error(f"workflow module {path} does not import: {why}",
              hint="Fix the module or remove it from DURABLE_WORKFLOW_MODULES; until then its workflows' runs "
                   "cannot resume here (they are blocked on their version, never run on other code).",
              obj=path, id="durable.E012")
        for path, why in sorted(failures.items())
    ]


def check_versions_in_flight() -> list[CheckMessage]:
    """durable.W001: a version with runs in flight is still registered."""
    from durable.versions import version_reports

    try:
        reports = version_reports()
    except DatabaseError:  # not migrated yet: nothing can be in flight
        return []
    return [
        Warning(
            f"{r.in_flight_total} run(s) of {r.workflow} v{r.version} are in flight, but this code does not "
            "register that version: they will be blocked when resumed.",
            hint="Keep the version registered until `manage.py durable_versions` says it can be retired, "
                 "or migrate the runs to a version that declares a migration from it "
                 "(docs/deploying.md#system-checks-that-guard-a-deploy).",
            obj=f"{r.workflow} v{r.version}", id="durable.W001",
        )
        for r in reports if not r.registered and r.in_flight_total
    ]


# -- the fault drill ---------------------------------------------------------------


def check_drills(workflows: Iterable[Workflow]) -> list[CheckMessage]:
    """durable.W011: the newest version of each workflow with side effects passed a full fault drill."""
    from durable.models import DrillRecord
    from durable.runtime.fault_points import FAULT_POINTS

    newest: dict[str, Workflow] = {}
    for wf in workflows:
        if wf.name not in newest or wf.version > newest[wf.name].version:
            newest[wf.name] = wf
    found: list[CheckMessage] = []
    for wf in newest.values():
        actions = {action for step in wf.steps for action in step.side_effects}
        if not actions:
            continue  # nothing for a crash to duplicate
        try:
            records = list(DrillRecord.objects.filter(workflow_name=wf.name, workflow_version=wf.version))
        except DatabaseError:  # not migrated yet: no drill has run
            records = []
        if any(r.passed and r.topology_fingerprint == wf.fingerprint and set(r.points) >= set(FAULT_POINTS)
               and set(r.actions) >= actions for r in records):
            continue
        found.append(Warning(
            f"New runs start on {wf.name} v{wf.version}, and no passing fault drill of every fault point and "
            f"side effect ({', '.join(sorted(actions))}) is recorded for its current steps"
            f"{_last_drill(records, wf)}.",
            hint=f"Run `{drill_command(wf, actions)}` with the production DATABASE_URL and CELERY_BROKER_URL; it "
                 "records its result there. It touches only what it creates: its runs belong to an account of its "
                 "own, approvals they ask for are decided by another of its own, its workers sweep only those runs, "
                 "on a queue of their own, and production's workers leave them alone. " + (
                     "--target names a class of yours that starts stand-ins of the workflow's downstreams and "
                     "counts what took effect (docs/fault-drill.md#drilling-a-host-projects-workflows)."
                     if is_host_project() else "See docs/fault-drill.md."),
            obj=f"{wf.name} v{wf.version}", id="durable.W011"))
    return found


def is_host_project() -> bool:
    """A project that embeds durable: the tools app (the drill's among them) is the standalone project's only."""
    from django.apps import apps

    return not apps.is_installed("durable.tools")


def drill_command(wf: Workflow, actions: Iterable[str], host: bool | None = None) -> str:
    """The command that drills `wf`: in a host project, under the drill's settings (which add the tools app to
    the host's own) and with the host's stand-ins of its downstreams."""
    command = (f"python manage.py durable_drill --workflow {wf.name} --workflow-version {wf.version} "
               f"--actions {','.join(sorted(actions))}")
    if not (is_host_project() if host is None else host):
        return command
    return (f"DURABLE_DRILL_SETTINGS={settings.SETTINGS_MODULE} {command} --settings durable.tools.drill_settings "
            "--target <your stand-ins' class, e.g. tests.drill_target.ShopDrill>")


def _last_drill(records: list[Any], wf: Workflow) -> str:
    if not records:
        return " (it was never drilled)"
    last = records[0]  # newest first
    when = f"{last.finished_at:%Y-%m-%d}"
    if last.topology_fingerprint != wf.fingerprint:
        return f" (the last drill, {when}, ran on other steps)"
    if not last.passed:
        return f" (the last drill, {when}, failed: {'; '.join(last.violations[:2])})"
    return f" (the last drill, {when}, armed only {', '.join(last.points)} in {', '.join(last.actions)})"


# -- the sweeper -----------------------------------------------------------------------


SWEEP_TASK = "durable.sweep"


def _beat_tasks() -> set[str]:
    """The tasks a beat schedule names: the project's CELERY_BEAT_SCHEDULE, or its Celery app's own."""
    from celery import current_app

    schedules = [getattr(settings, "CELERY_BEAT_SCHEDULE", None) or {}, current_app.conf.beat_schedule or {}]
    return {str(entry.get("task")) for schedule in schedules for entry in schedule.values() if isinstance(entry, dict)}


def check_sweeping(worker_sweeps: bool, beat_tasks: set[str]) -> list[CheckMessage]:
    """durable.W016: something runs the sweeper; without it a killed worker's runs stay RUNNING for good."""
    if worker_sweeps or SWEEP_TASK in beat_tasks:
        return []
    return [Warning(
        "Nothing will sweep: DURABLE_WORKER_SWEEPS is off and no beat schedule names durable.sweep, so the runs "
        "of a worker that dies stay RUNNING, retries never fall due and approvals never expire.",
        hint="Leave DURABLE_WORKER_SWEEPS on (every worker sweeps in turn), or schedule the durable.sweep task "
             "every DURABLE_SWEEP_SECONDS with Celery beat, or run `manage.py durable_sweep --loop` "
             "(docs/operations.md, \"Recovery\").",
        obj="DURABLE_WORKER_SWEEPS", id="durable.W016")]


# -- durable's settings ---------------------------------------------------------------


def check_login_lockout(axes_installed: bool, parameters: Any) -> list[CheckMessage]:
    """durable.W030: login forms lock a username out across addresses (django-axes, docs/embedding.md)."""
    hint = ('Add "axes" to INSTALLED_APPS, its middleware and backend, and AXES_LOCKOUT_PARAMETERS = '
            '["username", "ip_address"], as docs/embedding.md shows.')
    if not axes_installed:
        return [Warning("django-axes is not installed: nothing locks out a password guesser at the console's, the "
                        "browsable API's or the admin's login.", hint=hint, id="durable.W030")]
    flat = {p for parameter in (parameters if isinstance(parameters, (list, tuple)) else [])
            for p in ([parameter] if isinstance(parameter, str) else [])}
    if callable(parameters) or isinstance(parameters, str) or "username" in flat:
        return []  # a callable decides per request: the host chose its own rule
    return [Warning(f"AXES_LOCKOUT_PARAMETERS is {parameters!r}: a username is never locked out across addresses, "
                    "so a botnet guessing one password per address is never stopped.", hint=hint,
                    obj="AXES_LOCKOUT_PARAMETERS", id="durable.W030")]


def check_settings(project_settings: Any) -> list[CheckMessage]:
    """durable.E015: each DURABLE_* setting the project sets has the type and range durable.conf declares."""
    from durable.conf import SETTINGS, problem

    found: list[CheckMessage] = []
    for name in SETTINGS:
        if not hasattr(project_settings, name):
            continue  # the default applies
        wrong = problem(name, getattr(project_settings, name))
        if wrong:
            found.append(Error(f"{name} {wrong}.", hint=f"{SETTINGS[name].meaning} Default: {SETTINGS[name].default!r} "
                               "(docs/configuration.md).", obj=name, id="durable.E015"))
    return found


def check_limits(declared: Any) -> list[CheckMessage]:
    """durable.E045: each limit of DURABLE_LIMITS has a name, at least one of concurrency/rate/tokens, and fields
    that read (a rate "N/s", "N/m" or "N/h"; `per` None, "business_key" or "label:<field>"); the error names the
    limit and the field."""
    from durable.engine.call_limits import LimitSpec

    if not isinstance(declared, dict):
        return []  # durable.E015 names a DURABLE_LIMITS that is not a dict
    found: list[CheckMessage] = []
    for name, value in declared.items():
        try:
            LimitSpec.parse(name, value)
        except ValueError as exc:
            found.append(Error(f"DURABLE_LIMITS: {exc}.", hint="A limit is {\"concurrency\": N, \"rate\": \"N/m\", "
                               "\"tokens\": \"N/m\", \"per\": None} with at least one of the first three "
                               "(docs/configuration.md).", obj=f"DURABLE_LIMITS[{name!r}]", id="durable.E045"))
    return found
