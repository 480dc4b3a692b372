"""durable's settings: every DURABLE_* name the apps read, its default, its meaning and its check, in one place.

A project sets only what it changes, as flat Django settings (`DURABLE_LEASE_SECONDS = 120`);
the apps read them through `durable_settings`, never through `django.conf.settings` directly:

    from durable.conf import durable_settings
    durable_settings.DURABLE_LEASE_SECONDS

Like Django REST framework's `api_settings`, with one difference: nothing is cached, so a value
changed by `override_settings`, pytest-django's `settings` fixture or a plain assignment is seen at
once (a Django settings read is a dictionary lookup; there is nothing worth caching). The system
check `durable.E015` names a setting of the wrong type or out of range (durable/checks.py).
docs/configuration.md is generated from SETTINGS (tests/durable/test_conf.py keeps it in sync).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings


@dataclass(frozen=True)
class Setting:
    default: Any
    kind: str  # "seconds", "number", "count", "flag", "text", "url", "modules", "path", "prices", "limits"
    meaning: str
    optional: bool = False  # None is allowed (and is the default)
    zero_turns_off: bool = False  # a count whose meaning says what 0 does (no pool, no limit, nothing apart)


SETTINGS: dict[str, Setting] = {
    # The executor and the sweeper.
    "DURABLE_LEASE_SECONDS": Setting(10.0, "seconds", "How long a worker's claim on a run lasts without renewal; "
                                     "the worker's heartbeat renews it every third of it while it holds the run, "
                                     "and another worker takes the run over once it expires (a killed worker's "
                                     "runs resume about this long after, docs/operations.md)."),
    "DURABLE_TIME_SLICE_SECONDS": Setting(20.0, "seconds", "How long one task runs a run's steps back to back "
                                          "before it releases the lease and re-enqueues the run."),
    "DURABLE_PAUSE_LOOK_SECONDS": Setting(1.0, "seconds", "How often a worker looks whether a run it holds was "
                                          "asked to pause, between steps that make no call (after a step that made "
                                          "one, before a step that declares side effects, and before a step's first "
                                          "call after a boundary where it did not look, it always looks; "
                                          "docs/operations.md, \"Pausing runs\")."),
    "DURABLE_PARALLEL_CALLS": Setting(8, "count", "How many calls of one `ctx.parallel` group run at once "
                                      "(threads of the worker process); the rest wait for a free one."),
    "DURABLE_WORKER_RUNS": Setting(None, "count", "How many runs one worker process advances at once (the "
                                   "standalone project's Celery `worker_concurrency` on its threads pool; "
                                   "`--concurrency` overrides): while a run's step waits on a model or tool call, "
                                   "the process advances others. Unset: 200 on Postgres, 4 on SQLite, where "
                                   "writers take turns (docs/operations.md, \"Runs in flight\").", optional=True),
    "DURABLE_DB_POOL_SIZE": Setting(10, "count", "Postgres, the standalone project (a host sets its own "
                                    "`OPTIONS[\"pool\"]`): the most database connections one process (web or "
                                    "worker) opens, from Django's connection pool; a run holds one only while it "
                                    "reads or writes, never across a call. 0: no pool, a connection per thread "
                                    "kept CONN_MAX_AGE (durable.W017 adds the pools up against max_connections).",
                                    zero_turns_off=True),
    "DURABLE_DB_POOL_TIMEOUT_SECONDS": Setting(600.0, "seconds", "Postgres, the standalone project: how long a "
                                               "worker's thread waits for a free connection of its process's pool "
                                               "before the wait is an error; generous, so an exhausted pool makes "
                                               "runs wait, not fail. Web processes and commands wait 3 s, then a "
                                               "request is answered 503 (the database is unavailable)."),
    "DURABLE_MAX_STEP_VISITS": Setting(1000, "count", "The step budget: the most step visits a run may make "
                                       "(every step it runs, loops included) before it ends FAILED with "
                                       "`step_budget_exhausted`; a workflow sets its own with "
                                       "`Workflow(max_visits=...)`."),
    "DURABLE_EVENT_MAX_BYTES": Setting(262144, "count", "The largest event payload (as JSON) a run's mailbox "
                                       "takes, from the API or `durable.send_event`; larger is refused with 400."),
    "DURABLE_SWEEP_SECONDS": Setting(2.0, "seconds", "How often the sweeper runs: in the workers (one sweep "
                                     "per period across all of them), `manage.py durable_sweep --loop` and the "
                                     "standalone project's beat schedule."),
    "DURABLE_WORKER_SWEEPS": Setting(True, "flag", "Every Celery worker runs the sweeper in a thread of its own, "
                                     "taking turns through the database, so no other process is needed; turn "
                                     "off only when beat or `durable_sweep --loop` sweeps instead (durable.W016)."),
    "DURABLE_SCHEDULE_ON_TIME_SECONDS": Setting(60.0, "seconds", "A schedule's fire time found no later than this "
                                                "after it starts its run whatever the schedule's catch-up policy; "
                                                "one found later was missed (every worker down) and the policy "
                                                "says whether it starts a run (docs/operations.md, \"Schedules\")."),
    "DURABLE_PENDING_GRACE_SECONDS": Setting(10.0, "seconds", "How long a ready run may wait for its message "
                                             "before the sweeper sends another copy (then at growing gaps)."),
    "DURABLE_RECONCILE_AFTER_SECONDS": Setting(300.0, "seconds", "How long an operation may stay STARTED before "
                                               "the sweeper's automatic reconciler looks at it."),
    "DURABLE_RETENTION_DAYS": Setting(0.0, "number", "Finished runs older than this many days lose their "
                                      "checkpoints (but the last) and journal; 0 keeps everything."),
    "DURABLE_CHECKPOINT_FULL_EVERY": Setting(500, "count", "A checkpoint stores what changed since the one "
                                             "before; every this many, at most, it stores the whole state "
                                             "(docs/state-storage.md)."),
    "DURABLE_LARGE_VALUE_BYTES": Setting(65536, "count", "A part of a state, of a checkpoint's difference or of "
                                         "a recorded result heavier than this as JSON (a long string, a tool's "
                                         "result) is stored once, apart, by its content's hash, and referenced "
                                         "wherever it recurs; durable_prune deletes those no row refers to any "
                                         "more (0: every value is stored inline; docs/state-storage.md).",
                                         zero_turns_off=True),
    "DURABLE_MAX_VALUE_BYTES": Setting(32_000_000, "count", "A step's state or an activity's result heavier than "
                                       "this as JSON fails the step for good, with an error naming it and its "
                                       "size (0: no limit; Postgres refuses a jsonb value over 255 MB).",
                                       zero_turns_off=True),
    "DURABLE_WORKFLOW_MODULES": Setting([], "modules", "Modules imported at start-up that register workflows "
                                        "(`@register`); the standalone project lists the demo's."),
    "DURABLE_QUEUE": Setting(None, "text", "The Celery queue runs are sent to; unset: the Celery app's "
                             "CELERY_TASK_DEFAULT_QUEUE.", optional=True),
    "DURABLE_DELIVER_TWICE": Setting(False, "flag", "Send every run message twice, to prove duplicates are "
                                     "harmless. Drills only."),
    "DURABLE_PREPARE_STATEMENTS": Setting(True, "flag", "Postgres: the executor's claim, step writes and ledger "
                                          "moves are prepared on the server at their first run on a connection "
                                          "(needs `server_side_binding` in the database OPTIONS). Turn off "
                                          "behind a transaction-pooling PgBouncer."),
    "DURABLE_PIPELINE_STEP_WRITES": Setting(True, "flag", "Postgres: a step's checkpoint write is sent and "
                                            "the next step runs while it commits; its result is read before "
                                            "any other write, call or query (durable/store/in_flight.py)."),
    "DURABLE_BATCH_STEP_WRITES": Setting(True, "flag", "Postgres: the step writes of the runs a worker process "
                                         "advances go to one writer thread, which sends every write waiting as one "
                                         "statement; an activity's result goes as it answers, joined by its "
                                         "step's checkpoint when the step ends before the writer took it "
                                         "(durable/store/batched.py)."),
    "DURABLE_WORKER_GC_THRESHOLD": Setting(50000, "count", "A worker, once ready: what it loaded to start is "
                                           "frozen out of Python's cyclic garbage collector (`gc.freeze`) and young "
                                           "objects are collected after this many allocations, not Python's 700; "
                                           "with hundreds of runs in flight the collector took a tenth of the "
                                           "worker's CPU (docs/scaling.md). 0: Python's own.",
                                           zero_turns_off=True),
    "DURABLE_SCOPE_CREATED_BY": Setting(None, "count", "Tools only (durable/scope.py): this process's sweeper "
                                        "touches only the runs created by this account id; unset in "
                                        "production, whose sweeper leaves tool runs alone.", optional=True),
    # The console and the API (login lockout is django-axes' AXES_* settings: docs/operations.md).
    "DURABLE_STUCK_APPROVAL_HOURS": Setting(24.0, "number", "After how many hours the overview and the alert "
                                            "call a pending approval stuck."),
    "DURABLE_CONSOLE_POLL_SECONDS": Setting(5.0, "seconds", "How often an open console screen asks whether "
                                            "what it shows changed (answered 304 while it did not; "
                                            "docs/console.md gives the cost)."),
    "DURABLE_API_TOKEN_DAYS": Setting(90.0, "number", "How many days a new API token lives, unless it is made "
                                      "with an expiry of its own."),
    "DURABLE_BULK_LIMIT": Setting(500, "count", "The most runs one bulk cancel or retry acts on (the console's "
                                  "and `POST /api/runs/bulk/`); a larger selection is refused with a 400 saying so."),
    "DURABLE_BEHIND_TLS_PROXY": Setting(False, "flag", "Trust the proxy's X-Forwarded-For for the caller's "
                                        "address (set it only behind a proxy that sets it)."),
    "DURABLE_DEVELOPMENT": Setting(False, "flag", "A developer's machine: the console over plain HTTP "
                                   "(`runserver`), cookies without Secure, no HSTS, no redirect to HTTPS (the "
                                   "standalone project; a host's settings follow it, docs/embedding.md). "
                                   "`check --deploy` refuses it (durable.E050)."),
    # Observability.
    "DURABLE_METRICS_TOKEN": Setting("", "text", "The bearer token Prometheus sends to /metrics; empty: only a "
                                     "logged-in user with durable.view_run may read it."),
    "DURABLE_METRICS_DIR": Setting(None, "path", "Where every process writes its Prometheus counters; "
                                   "PROMETHEUS_MULTIPROC_DIR wins when set; unset: a folder in the system's "
                                   "temporary directory.", optional=True),
    "DURABLE_OTEL": Setting(False, "flag", "Traces: every process of the project (web, worker, command) instruments "
                            "Django, Celery and psycopg and records durable's spans with OpenTelemetry (the "
                            "`otel` extra; durable.W040 says when it is missing); the host's tracer provider "
                            "exports them (docs/observability.md#traces)."),
    "DURABLE_TRACE_URL": Setting("", "url", "Where a trace is shown, with `{trace_id}` in it "
                                 "(`https://tempo.example/trace/{trace_id}`): the run page links its run's trace "
                                 "there; empty: no link."),
    # Notifications (docs/notifications.md): events an operator asked for, by email and to the install's webhook.
    "DURABLE_NOTIFY_WEBHOOK_URL": Setting("", "url", "The one webhook endpoint notifications are POSTed to, set by "
                                          "whoever deploys (never by a console user: docs/security.md); empty: "
                                          "no webhook channel."),
    "DURABLE_NOTIFY_WEBHOOK_SECRET": Setting("", "text", "The secret the Durable-Signature header's HMAC-SHA256 "
                                             "is keyed with; the receiver holds the same."),
    "DURABLE_NOTIFY_CONSOLE_URL": Setting("", "url", "Where the console is (https://ops.example.com/durable), so a "
                                          "message links to its page; empty: messages carry the path only."),
    "DURABLE_NOTIFY_EXPIRY_WARNING_SECONDS": Setting(3600.0, "seconds", "How long before an approval expires the "
                                                     "sweeper warns of it."),
    "DURABLE_NOTIFY_DIGEST_AFTER": Setting(10, "count", "Messages per recipient and channel within one digest "
                                           "window; past it the rest wait for one digest at the window's end."),
    "DURABLE_NOTIFY_DIGEST_WINDOW_SECONDS": Setting(900.0, "seconds", "The digest window (aligned to the clock)."),
    "DURABLE_NOTIFY_MAX_ATTEMPTS": Setting(8, "count", "Attempts at a delivery before it is FAILED (shown on the "
                                           "notifications page and in the admin)."),
    "DURABLE_NOTIFY_RETRY_SECONDS": Setting(10.0, "seconds", "The wait before a failed delivery's second attempt; "
                                            "it doubles at each attempt, up to an hour."),
    "DURABLE_NOTIFY_LEASE_SECONDS": Setting(60.0, "seconds", "How long a worker's claim on a delivery lasts; after "
                                            "it the sweeper sends the delivery again (same delivery id)."),
    # Downstreams and the demo workflow.
    "DURABLE_HTTP_TIMEOUT_SECONDS": Setting(5.0, "seconds", "The timeout of the HTTP clients of the demo's "
                                            "downstreams and LLM; at most half of DURABLE_LEASE_SECONDS "
                                            "(durable.E014), so a call fits in one lease should the heartbeat "
                                            "fail to renew it."),
    "DURABLE_SANDBOX_URL": Setting("http://127.0.0.1:8765", "url", "Where the demo's sandbox downstreams "
                                   "answer."),
    "DURABLE_DEMO_REPLY_SECONDS": Setting(172800, "seconds", "How long the demo's support-agent waits for a "
                                          "customer's reply (`ask_customer`) before it gives up: two days; the "
                                          "embedded demo (`bin/demo`) shortens it to ten minutes."),
    "DURABLE_DEMO_FOLLOW_UP_SECONDS": Setting(259200, "seconds", "How long the demo's support-agent sleeps "
                                              "before its follow-up email (`follow_up`): three days; the embedded "
                                              "demo shortens it to one minute."),
    "DURABLE_LLM_BASE_URL": Setting("", "url", "An OpenAI-compatible endpoint for the demo's models (the "
                                    "claims agent's planner, the support agent); empty: their scripted models."),
    "DURABLE_LLM_API_KEY": Setting("", "text", "The API key for DURABLE_LLM_BASE_URL."),
    "DURABLE_LLM_MODEL": Setting("gpt-4o-mini", "text", "The model the demo's agents ask for."),
    # Named limits on calls, held across every worker (docs/workflows.md, "Limits and priority").
    "DURABLE_LIMITS": Setting({}, "limits", "Named limits on calls, each with any of `concurrency` (calls at once), "
                              "`rate` and `tokens` (\"N/s\", \"N/m\" or \"N/h\") and `per` (None, "
                              "\"business_key\" or \"label:<field of the run's input>\"): `{\"openai\": "
                              "{\"concurrency\": 50, \"rate\": \"500/m\", \"tokens\": \"200000/m\"}}`. A call "
                              "names one with `limit=`; the environment variable holds it as JSON. Checked at start-up "
                              "(`durable.E045`)."),
    "DURABLE_LIMIT_RATE_MARGIN_SECONDS": Setting(0.05, "seconds", "A rate limit counts call starts in its period "
                                                 "widened by this margin, so that a provider counting arrivals sees at "
                                                 "most N in any period although each call reaches it a little after "
                                                 "its start was recorded; costs margin / period of a rate's "
                                                 "throughput."),
    "DURABLE_LIMIT_SPIN_SECONDS": Setting(0.25, "seconds", "A call whose limit frees room within this many seconds "
                                          "(a rate's window slides) waits in its thread and tries again; a longer "
                                          "wait parks its run. 0: always park."),
    # A run's stream (docs/operations.md, "Streams"): what steps publish with ctx.stream, followed over SSE.
    "DURABLE_STREAM_RETENTION_SECONDS": Setting(3600.0, "seconds", "How long what steps publish (`ctx.stream`) is "
                                                "kept: a follower reconnecting with Last-Event-ID within it misses "
                                                "nothing; the sweeper deletes older chunks."),
    "DURABLE_STREAM_MAX_SECONDS": Setting(300.0, "seconds", "The longest one `GET /api/runs/{id}/stream/` "
                                          "response lasts: it holds a web worker thread meanwhile, then ends and "
                                          "the client reconnects with Last-Event-ID (an EventSource does so itself)."),
    "DURABLE_STREAM_KEEPALIVE_SECONDS": Setting(15.0, "seconds", "How often an idle stream sends a comment, so "
                                                "proxies keep it open and a gone client is noticed."),
    "DURABLE_STREAM_POLL_SECONDS": Setting(0.02, "seconds", "How often a web process reads the chunks published "
                                           "for the runs its clients follow: one query per process for all of them, "
                                           "only while some client follows."),
    "DURABLE_STREAM_TRANSPORT": Setting("auto", "text", "How a web process learns that the runs its clients follow "
                                        "published: `poll` reads every DURABLE_STREAM_POLL_SECONDS; `notify` "
                                        "(Postgres) listens on its reading connection for the NOTIFY a worker sends "
                                        "after each chunk, and reads then (and every second, for a notification "
                                        "lost and the runs that ended); `auto`: poll, measured best for dense "
                                        "streams (docs/operations.md, \"Streams\"; durable.E055)."),
    # What model calls cost (docs/workflows.md, "Model calls and budgets").
    "DURABLE_LLM_PRICES": Setting({}, "prices", "Each model's price per million input and output tokens, as "
                                  "decimal strings: `{\"gpt-4o-mini\": {\"input\": \"0.15\", \"output\": "
                                  "\"0.60\"}}`. A dated snapshot (`gpt-4o-mini-2024-07-18`) takes its model's "
                                  "price; a model not listed counts its tokens with its cost unknown."),
}

DEFAULTS: dict[str, Any] = {name: setting.default for name, setting in SETTINGS.items()}


class DurableSettings:
    """The one accessor: the project's value when it sets one, else the default."""

    def __getattr__(self, name: str) -> Any:
        if name not in SETTINGS:
            raise AttributeError(f"{name} is not a durable setting (durable.conf.SETTINGS lists them)")
        return getattr(settings, name, DEFAULTS[name])


durable_settings = DurableSettings()


def problem(name: str, value: Any) -> str | None:
    """What is wrong with a value of a setting, in words; None when it is fine."""
    spec = SETTINGS[name]
    if value is None:
        return None if spec.optional else "must be set (it has no empty value)"
    kind = spec.kind
    if kind in ("seconds", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, not {type(value).__name__} {value!r}"
        if value < 0:
            return f"must not be negative, not {value!r}"
    elif kind == "count":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number, not {type(value).__name__} {value!r}"
        least = 0 if spec.zero_turns_off else 1
        if value < least:
            return f"must be at least {least}, not {value!r}"
    elif kind == "flag":
        if not isinstance(value, bool):
            return f"must be True or False, not {type(value).__name__} {value!r}"
    elif kind in ("text", "url"):
        if not isinstance(value, str):
            return f"must be a string, not {type(value).__name__} {value!r}"
        if kind == "url" and value and not value.startswith(("http://", "https://")):
            return f"must be an http(s) URL, not {value!r}"
    elif kind == "modules":
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                isinstance(item, str) for item in value):
            return f"must be a list of module names, not {value!r}"
    elif kind == "path":
        from os import PathLike

        if not isinstance(value, (str, PathLike)):
            return f"must be a path, not {type(value).__name__} {value!r}"
    elif kind == "prices":
        from durable.engine.costs import PriceTable

        try:
            PriceTable.parse(value)
        except ValueError as exc:
            return str(exc)
    elif kind == "limits" and not isinstance(value, dict):
        return f"must be a dict of limit name -> fields, not {type(value).__name__} {value!r}"  # the rest: E045
    return None
