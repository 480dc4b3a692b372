"""The example host project's settings: a shop's own Django project that adds durable's three apps.

Everything durable needs is here and nothing of durable's standalone project (durable.project) is
imported: a host configures its own database, users, Celery app and static files, and sets only
the DURABLE_* settings it changes (docs/configuration.md has every one and its default).
"""
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("HOST_VAR_DIR") or BASE_DIR / "var")  # SQLite file, filesystem broker, static
VAR_DIR.mkdir(parents=True, exist_ok=True)

# The shop's own rule: no secret key, no start. Nothing falls back to a default one.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    raise ImproperlyConfigured("Set SECRET_KEY in the environment (the shop never runs on a default key).")
DEBUG = os.environ.get("SHOP_DEBUG", "") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]

INSTALLED_APPS = [
    "shop",  # first: its AUTH_USER_MODEL and migrations; durable's migrations depend on the swappable user
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",  # the API's schema at /ops/api/schema/
    "django_htmx",
    "axes",  # login lockout at every login form (docs/embedding.md)
    "durable",
    "approvals",
    "reconciliation",
    # Never "durable.tools": the demo, drill and benchmark belong to durable's own project, not a host's.
]
AUTH_USER_MODEL = "shop.User"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # serves collectstatic's files, durable's among them
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "durable.middleware.RefusalLogMiddleware",  # every 403 answered: one row in durable's security log
    "durable.middleware.ActorMiddleware",  # names who granted or removed a role in durable's audit trail
    "durable.middleware.OperatorTimezoneMiddleware",  # console times in each operator's zone
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # the console's views answer htmx requests with fragments
    "axes.middleware.AxesMiddleware",  # last: a locked-out login answered 429
]

ROOT_URLCONF = "host.urls"
WSGI_APPLICATION = "host.wsgi.application"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [BASE_DIR / "host" / "templates"],  # before the apps': its durable/base.html wins
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "approvals.context_processors.pending_approvals",  # the console's approvals badge
    ]},
}]

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{VAR_DIR / 'shop.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker processes share the file: wait for locks, take the write lock at BEGIN. Write-ahead logging:
    # a worker killed mid-write (the fault drill kills them on purpose) leaves nothing that locks the others out.
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE",
                                       "init_command": "PRAGMA journal_mode=WAL;"}
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}  # a file a worker can open too
else:  # Postgres: server-side binding lets durable's run store prepare its statements (docs/embedding.md)
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"  # python manage.py collectstatic
STATIC_ROOT.mkdir(exist_ok=True)

LOGIN_URL = "durable:login"  # the console's login (a host may keep its own instead)
LOGIN_REDIRECT_URL = "durable:overview"
CSRF_FAILURE_VIEW = "durable.security.csrf_failure"  # Django's page; durable's security log gets the reason

REST_FRAMEWORK = {
    # durable's API tokens (hashed, expiring, revocable: manage.py durable_tokens, /ops/tokens/).
    "DEFAULT_AUTHENTICATION_CLASSES": ["durable.api.authentication.ApiTokenAuthentication",
                                       "rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "durable.api.schema.AutoSchema",
}

# Login lockout (django-axes), as docs/embedding.md shows: a username locked from every address, an address
# over every username, in the database every web process shares.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_HANDLER = "durable.lockout.LoginAttemptHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = 0.25  # hours: a lock lasts 15 minutes
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_USERNAME_CALLABLE = "durable.lockout.username_of"
AXES_CLIENT_IP_CALLABLE = "durable.security.client_address"
AXES_LOCKOUT_CALLABLE = "durable.lockout.locked_out"

# The shop's Celery app (host/celery.py) reads these. Its own queue; CELERY_BROKER_URL from the environment.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"data_folder_in": str(BROKER_DIR), "data_folder_out": str(BROKER_DIR), "processed_folder": str(BROKER_DIR),
     "control_folder": str(BROKER_DIR / "control")}
    if CELERY_BROKER_URL.startswith("filesystem") else {})
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("SHOP_QUEUE", "shop")  # durable sends runs here (DURABLE_QUEUE unset)
CELERY_TASK_IGNORE_RESULT = True
CELERY_DB_REUSE_MAX = 1000  # keep a worker's connection between runs (durable.runtime.worker.configure closes stale ones)
CELERY_TASK_ACKS_LATE = True  # a worker that dies mid-run leaves the message for another
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# durable: only what the shop changes from the defaults in durable/conf.py.
DURABLE_WORKFLOW_MODULES = ["shop.workflows"]
DURABLE_STUCK_APPROVAL_HOURS = 8.0  # the shop answers refunds within a working day

# The shop's own downstream (the orders, refunds and notices service its workflow calls).
SHOP_DOWNSTREAM_URL = os.environ.get("SHOP_DOWNSTREAM_URL", "http://127.0.0.1:8900")
SHOP_DOWNSTREAM_TIMEOUT_SECONDS = 2.0
