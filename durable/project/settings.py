"""Settings for durable's standalone project. Everything a deployment changes comes from the environment."""
from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import dj_database_url

from durable.conf import DEFAULTS, SETTINGS, Setting

BASE_DIR = Path(__file__).resolve().parent.parent.parent  # the checkout: durable/project/settings.py
# Run from a checkout, var/ beside manage.py; installed (site-packages is no place for a database), var/
# under the working directory. DURABLE_VAR_DIR chooses it anywhere.
VAR_DIR = Path(os.environ.get("DURABLE_VAR_DIR") or
               (BASE_DIR / "var" if (BASE_DIR / "manage.py").is_file() else Path.cwd() / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # the embedded default keeps its SQLite file and broker here

# Prometheus multiprocess mode: every process of this machine (web and workers) writes its
# counters to files in one directory and /metrics adds them up. prometheus_client decides
# the mode from the environment when it is first imported, so this must run before any
# metric exists; every process loads these settings first, and children inherit the variable.
# PROMETHEUS_MULTIPROC_DIR, when the deployment sets it, wins.
DURABLE_METRICS_DIR = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                           or os.environ.get("DURABLE_METRICS_DIR") or VAR_DIR / "metrics")
DURABLE_METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(DURABLE_METRICS_DIR)


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG", False)
# The embedded demo on http://127.0.0.1 (bin/demo sets this): plain cookies, and a key of this machine's own.
DURABLE_EMBEDDED_DEMO = env_bool("DURABLE_EMBEDDED_DEMO", False)
# A developer's machine (docs/deploying.md, "Developing on plain HTTP"): `runserver` over plain HTTP, cookies without
# Secure (so a Python client's login keeps its CSRF cookie), no HSTS, no redirect, a key of this machine's own.
# `check --deploy` refuses it (durable.E050), so it cannot reach production unnoticed.
DURABLE_DEVELOPMENT = env_bool("DURABLE_DEVELOPMENT", False)
# Keys anyone can read (this project's old embedded default, Django's startproject prefix, the docs' placeholder).
PUBLISHED_SECRET_KEYS = ("insecure-embedded-default-change-me", "...", "change-me", "changeme")


def secret_key(environ: Mapping[str, str], *, debug: bool, demo: bool, var_dir: Path) -> str:
    """SECRET_KEY from the environment; only the embedded demo or DEBUG falls back to a key kept in var/."""
    given = environ.get("SECRET_KEY", "").strip()
    published = given in PUBLISHED_SECRET_KEYS or given.startswith("django-insecure")
    if given and not published:
        return given
    if demo or debug:
        return _local_secret_key(var_dir)
    from django.core.exceptions import ImproperlyConfigured

    problem = "is a published placeholder" if given else "is not set"
    raise ImproperlyConfigured(
        f"SECRET_KEY {problem}. Set SECRET_KEY to a long random value, the same on every web and worker machine "
        "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'). Only the embedded demo (bin/demo, "
        "DURABLE_EMBEDDED_DEMO=1), a developer's machine (DURABLE_DEVELOPMENT=true) or DJANGO_DEBUG=true runs without "
        "one.")


def _local_secret_key(var_dir: Path) -> str:
    """A random key made once for this var/ directory and shared by every process that uses it."""
    path = var_dir / "secret_key"
    if not path.exists():
        import secrets

        draft = var_dir / f"secret_key.{os.getpid()}"
        draft.write_text(secrets.token_urlsafe(50))
        draft.chmod(0o600)
        try:
            os.link(draft, path)  # atomic: a process starting at the same time keeps the first key written
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


SECRET_KEY = secret_key(os.environ, debug=DEBUG, demo=DURABLE_EMBEDDED_DEMO or DURABLE_DEVELOPMENT, var_dir=VAR_DIR)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "axes",  # login lockout at every door (durable/lockout.py)
    "durable",
    "approvals",
    "reconciliation",
    "durable.tools",  # the demo, benchmark, drill and scale-out commands: this project only, never a host's
]

MIDDLEWARE = [
    "durable.middleware.DatabaseUnavailableMiddleware",  # first: the last to see a view's exception
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files from any web process, no extra server
    "durable.middleware.NoStoreMiddleware",  # below WhiteNoise: static files stay cacheable, pages never
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "durable.middleware.RefusalLogMiddleware",  # every 403 answered writes one security-log row saying why
    "durable.middleware.ActorMiddleware",  # names who granted or removed a role in the audit trail
    "durable.middleware.OperatorTimezoneMiddleware",  # times in the operator's zone (after auth)
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as axes asks: turns a locked-out login into its 429
]

ROOT_URLCONF = "durable.project.urls"
WSGI_APPLICATION = "durable.project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.context_processors.pending_approvals",
            ],
        },
    },
]

def _environment_count(name: str) -> int:
    """A count durable reads here, before its settings are taken from the environment below: the variable, or
    its default in durable/conf.py."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else int(DEFAULTS[name])


# Embedded default: a SQLite file in var/. Production: DATABASE_URL (Postgres).
SQLITE_PATH = VAR_DIR / "durable.sqlite3"
DATABASES = {
    "default": dj_database_url.config(default=f"sqlite:///{SQLITE_PATH}", conn_max_age=600, conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        # Several processes (web, workers) share the file: wait for locks instead of failing,
        # take the write lock at BEGIN so two writers never deadlock on upgrade.
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Bind parameters on the server, so that the run store can prepare the executor's few hot
    # statements (DURABLE_PREPARE_STATEMENTS, durable/store/postgres.py). Nothing else is prepared:
    # psycopg's prepare_threshold stays None (Django's default), because a prepared console query
    # gets a generic plan after five runs, and a generic plan for a search LIKE over the trigram
    # indexes took 15 ms searches to 365 ms (docs/benchmarks-log.md).
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = env_bool(
        "DURABLE_DB_SERVER_SIDE_BINDING", True)
    # Connections from a pool per process (Django's, psycopg_pool): a worker advances hundreds of runs at once
    # and each holds a connection only while it reads or writes, never across a model or tool call (invariant
    # 21), so the process needs DURABLE_DB_POOL_SIZE connections, not one per run. A thread that finds the pool
    # busy waits for a connection (DURABLE_DB_POOL_TIMEOUT_SECONDS, generous): runs wait, they do not fail.
    # Pooling needs CONN_MAX_AGE 0: a connection goes back to the pool when Django would have closed it.
    # The pool checks nothing on checkout: a connection that died idle fails its first statement, the task
    # ends, the run is sent again (durable/store/health.py), as with a proven connection before pooling.
    DURABLE_DB_POOL_SIZE = _environment_count("DURABLE_DB_POOL_SIZE")
    NON_WORKER_POOL_TIMEOUT_SECONDS = 3.0
    if DURABLE_DB_POOL_SIZE > 0:
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
        DATABASES["default"]["OPTIONS"]["pool"] = {
            "min_size": 1, "max_size": DURABLE_DB_POOL_SIZE, "max_idle": 300,
            # A web request or a command waits a few seconds (a refused or lost database answers 503 then, not
            # after minutes); a worker's runs wait DURABLE_DB_POOL_TIMEOUT_SECONDS (durable/project/celery.py).
            "timeout": NON_WORKER_POOL_TIMEOUT_SECONDS,
        }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Login lockout (django-axes, docs/operations.md#login-lockout). Its backend comes first, so every password check
# (console, browsable API, admin) is refused while the username or the address is locked, the right password too.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# The database handler: the lock state is in the database every web process shares. (axes' cache handler would
# need a cache shared by every process, and this project's default cache is each process's own memory.)
AXES_HANDLER = "durable.lockout.LoginAttemptHandler"  # axes' database handler, an address allowed 4x a username
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # a username from all addresses; an address over all names
AXES_FAILURE_LIMIT = int(os.environ.get("AXES_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(seconds=int(os.environ.get("AXES_COOLOFF_SECONDS", "900")))
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # a lock ends when it said it would; refusals add nothing
AXES_USERNAME_CALLABLE = "durable.lockout.username_of"  # NFKC + case-folded: `ＡＮＮ` is `ann`
AXES_CLIENT_IP_CALLABLE = "durable.security.client_address"  # X-Forwarded-For only behind DURABLE_BEHIND_TLS_PROXY
AXES_LOCKOUT_CALLABLE = "durable.lockout.locked_out"  # the console's page (429) at the console, plain text elsewhere

# Django's validators, at least 12 characters, plus the demo's published password (its users are created by
# `manage.py durable_up` only, which sets their password without these checks).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    {"NAME": "durable.passwords.PublishedPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # filled by collectstatic, served by WhiteNoise
# The standalone project's own static files (its icon), as templates/ holds its template overrides; the apps
# ship theirs in their packages. Both come with the checkout, never with the wheel: installed, there are none.
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STATIC_ROOT.mkdir(exist_ok=True)

LOGIN_URL = "durable:login"
LOGIN_REDIRECT_URL = "durable:overview"
LOGOUT_REDIRECT_URL = "durable:login"

# Everything but the embedded demo, DEBUG and a developer's machine is served over HTTPS (TLS ends at the proxy;
# DURABLE_BEHIND_TLS_PROXY=true trusts its X-Forwarded-Proto): secure cookies, HSTS, plain HTTP
# redirected. The demo on http://127.0.0.1 keeps plain cookies.
def serves_https(environ: Mapping[str, str], *, debug: bool, demo: bool, development: bool) -> bool:
    """Whether this project is served over HTTPS only; DURABLE_DEVELOPMENT says plain HTTP, whatever else is set."""
    given = environ.get("DURABLE_HTTPS", "").strip().lower()
    if development:
        return False
    return given in {"1", "true", "yes", "on"} if given else not debug and not demo


DURABLE_HTTPS = serves_https(os.environ, debug=DEBUG, demo=DURABLE_EMBEDDED_DEMO, development=DURABLE_DEVELOPMENT)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = DURABLE_HTTPS
SECURE_HSTS_SECONDS = int(os.environ.get("DURABLE_HSTS_SECONDS", "31536000")) if DURABLE_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = DURABLE_HTTPS
SECURE_HSTS_PRELOAD = DURABLE_HTTPS and env_bool("DURABLE_HSTS_PRELOAD", False)  # the domain owner's commitment
SECURE_SSL_REDIRECT = not DURABLE_DEVELOPMENT and env_bool("DURABLE_SSL_REDIRECT", DURABLE_HTTPS)
DURABLE_BEHIND_TLS_PROXY = env_bool("DURABLE_BEHIND_TLS_PROXY", False)  # also: trust its X-Forwarded-For
if DURABLE_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CSRF_FAILURE_VIEW = "durable.security.csrf_failure"  # Django's page; the security log gets the reason

# Content Security Policy (django-csp): the console has no inline scripts or styles, and every
# script, stylesheet and font comes from our own static files, so nothing else may run or load.
# Style *attributes* are allowed: DRF's browsable API and the admin use a few, and an attribute
# can neither run script nor load from anywhere img-src does not allow.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    },
}

# The API throttles count in the cache: give several web processes one shared cache (CACHE_URL=redis://...).
# (Login lockout is in the database, AXES_HANDLER above.)
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["CACHE_URL"]}
          if os.environ.get("CACHE_URL") else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: an anonymous API call gets 401 with WWW-Authenticate, not a bare 403.
        "durable.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with JSON nested past Python's recursion limit a 400 rather than a 500.
    "DEFAULT_PARSER_CLASSES": ["durable.api.parsers.JSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.AnonRateThrottle",
                                 "rest_framework.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"anon": os.environ.get("DURABLE_API_ANON_RATE", "60/min"),
                               "user": os.environ.get("DURABLE_API_USER_RATE", "6000/min")},
    "DEFAULT_SCHEMA_CLASS": "durable.api.schema.AutoSchema",  # documents the error answers too
}
SPECTACULAR_SETTINGS = {
    "TITLE": "durable API",
    "DESCRIPTION": "Start, inspect and steer durable agent runs.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "durable.models.RUN_STATUS_CHOICES",
        "SideEffectStatusEnum": "durable.models.OPERATION_STATUS_CHOICES",
        "ApprovalStatusEnum": "approvals.models.APPROVAL_STATUS_CHOICES",
        "ApprovalPathEnum": "approvals.models.PATH_CHOICES",
        "WaitKindEnum": "durable.api.filters.WAIT_KINDS",  # a run's waiting_for.kind, and the runs list's filter
        "ScheduleOverlapEnum": "durable.models.Schedule.Overlap",
        "ScheduleCatchUpEnum": "durable.models.Schedule.CatchUp",
    },
}

# Celery. Embedded default: kombu's filesystem transport, which needs no server.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = (
    {"data_folder_in": str(BROKER_DIR), "data_folder_out": str(BROKER_DIR), "processed_folder": str(BROKER_DIR),
     "control_folder": str(BROKER_DIR / "control")}
    if CELERY_BROKER_URL.startswith("filesystem")
    # Redis: no acknowledgement emulation. With it kombu keeps every delivered message in an "unacked"
    # hash and zset until the ack, two more Redis round trips a task (about 10% of one worker's
    # steps/s, docs/benchmarks-log.md), to re-send it only after visibility_timeout (1 hour) when a worker
    # died holding it; the sweeper re-sends such a run at its first sweep after the run's lease ran
    # out instead (invariant 9). A worker stopped politely still puts its unstarted
    # messages back. DURABLE_REDIS_ACK_EMULATION=true restores kombu's default.
    else {"ack_emulation": env_bool("DURABLE_REDIS_ACK_EMULATION", False)}
    if CELERY_BROKER_URL.startswith(("redis", "rediss", "sentinel"))
    else {}
)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker process advances many runs at once (docs/operations.md, "Runs in flight"): Celery's threads pool, one
# thread per run in flight, so `celery -A durable.project worker -Q durable` needs no pool option; `--pool` and
# `--concurrency` still override. Threads, not gevent: psycopg 3 and Django's connections are not green-safe,
# and a run's step waits on blocking HTTP clients. SQLite takes one writer at a time: a few threads are enough.
CELERY_WORKER_POOL = "threads"
_IS_SQLITE = DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
DURABLE_WORKER_RUNS = (int(os.environ["DURABLE_WORKER_RUNS"]) if os.environ.get("DURABLE_WORKER_RUNS", "").strip()
                       else 4 if _IS_SQLITE else 200)
CELERY_WORKER_CONCURRENCY = DURABLE_WORKER_RUNS
# Celery's Django fixup closes every database connection before and after each task unless this is
# set (then every 2 x this many tasks): a new Postgres connection per run, the largest per-run cost
# durable_bench --compare measured. Django's CONN_MAX_AGE and CONN_HEALTH_CHECKS decide instead, at
# each task's start and end (durable/project/celery.py), as they do per request in the web processes.
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("DURABLE_QUEUE", "durable")
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# durable's own settings: every one has its default in durable/conf.py (docs/configuration.md);
# this project sets only what it changes, and takes any of them from an environment variable
# of the same name (DURABLE_LEASE_SECONDS=120). DURABLE_QUEUE names the Celery queue above.
DURABLE_WORKFLOW_MODULES = ["durable.tools.demo.claims_agent", "durable.tools.demo.support_agent"]
if DURABLE_EMBEDDED_DEMO:  # the support agent's waits, short enough to watch: a reply within 10 minutes, then
    DURABLE_DEMO_REPLY_SECONDS = 600.0  # it gives up; its follow-up email a minute after the refund
    DURABLE_DEMO_FOLLOW_UP_SECONDS = 60.0


# The support agent's Pydantic AI twin, where Pydantic AI is installed (durable[pydantic-ai], which [demo] includes).
if importlib.util.find_spec("pydantic_ai") is not None:
    DURABLE_WORKFLOW_MODULES.append("durable.tools.demo.support_agent_pydantic_ai")
# Its OpenAI Agents SDK twin, where the SDK is installed (durable[openai-agents]).
if importlib.util.find_spec("agents") is not None:
    DURABLE_WORKFLOW_MODULES.append("durable.tools.demo.support_agent_openai_agents")
# What model calls cost, per million tokens (docs/workflows.md, "Model calls and budgets"): the demo's scripted
# support model is priced as the model it stands in for, so the demo shows what each run would cost.
DURABLE_LLM_PRICES = {"gpt-4o-mini": {"input": "0.15", "output": "0.60"},
                      "scripted-support": {"input": "0.15", "output": "0.60"}}


def _from_environment(names: Mapping[str, Setting], environ: Mapping[str, str]) -> dict[str, object]:
    """The durable settings the environment sets, read as the type each one is."""
    read: dict[str, Callable[[str], object]] = {"seconds": float, "number": float, "count": int, "text": str, "url": str, "path": Path,
            "flag": lambda v: v.strip().lower() in {"1", "true", "yes", "on"},
            "modules": lambda v: [m.strip() for m in v.split(",") if m.strip()], "prices": json.loads, "limits": json.loads}
    found: dict[str, object] = {}
    for name, spec in names.items():
        if not environ.get(name, "").strip() or name in ("DURABLE_QUEUE", "DURABLE_METRICS_DIR"):
            continue  # unset; or read above
        try:
            found[name] = read[spec.kind](environ[name])
        except ValueError:
            raise RuntimeError(f"The environment variable {name}={environ[name]!r} is not a {spec.kind} value: "
                               f"{spec.meaning}") from None
    return found


globals().update(_from_environment(SETTINGS, os.environ))

# Traces (docs/observability.md#traces): DURABLE_OTEL=true instruments every process when the apps are ready;
# the spans go where OpenTelemetry's own variables say (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME...).
if globals().get("DURABLE_OTEL"):
    from durable.project.telemetry import export_traces

    export_traces(os.environ)

CELERY_BEAT_SCHEDULE = {
    "durable-sweep": {"task": "durable.sweep", "schedule": timedelta(
        seconds=globals().get("DURABLE_SWEEP_SECONDS", DEFAULTS["DURABLE_SWEEP_SECONDS"]))},
}

# Retention: finished runs older than this many days lose their checkpoints (but the last)
# and their journal; the ledger and audit trail stay. Unset or 0: keep everything.
if globals().get("DURABLE_RETENTION_DAYS", DEFAULTS["DURABLE_RETENTION_DAYS"]) > 0:
    CELERY_BEAT_SCHEDULE["durable-prune"] = {"task": "durable.prune", "schedule": timedelta(days=1)}


# Logs: JSON lines in production (DATABASE_URL set, DEBUG off), readable text in the demo.
# Every line carries the run, workflow, version, step, attempt and operation it belongs to
# (durable.logs). Celery workers use this same configuration (durable/project/celery.py).
def log_format(environ: Mapping[str, str], debug: bool) -> str:
    chosen = environ.get("DURABLE_LOG_FORMAT", "").strip().lower()
    if not chosen:
        return "json" if environ.get("DATABASE_URL") and not debug else "text"
    if chosen not in ("json", "text"):
        raise RuntimeError(f"DURABLE_LOG_FORMAT must be 'json' or 'text', not {chosen!r}")
    return chosen


DURABLE_LOG_FORMAT = log_format(os.environ, DEBUG)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_context": {"()": "durable.logs.RunContextFilter"}},
    "formatters": {"json": {"()": "durable.logs.JsonFormatter"}, "text": {"()": "durable.logs.TextFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": DURABLE_LOG_FORMAT,
                             "filters": ["run_context"]}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "durable": {"level": os.environ.get("DURABLE_LOG_LEVEL", "INFO")},
        "django": {"handlers": [], "level": "INFO"},  # through the root's handler, in the same format
    },
}
