"""A host project without django-axes starts (docs/embedding.md): `check` warns durable.W030, the console's login
works, nothing locks out, and no module of the three apps but durable.lockout loads axes' models.

INSTALLED_APPS cannot change inside one process, so each test runs a process of its own with
tests/host_settings_without_axes.py, on an in-memory SQLite database."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from django.conf import settings

AXES_ONLY = "durable.lockout"  # the one module that is axes' (imported from ready() only when axes is installed)

IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # the URLs load as the first request would load them

def walk(package):
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.startswith(%(skip)r):
            continue
        module = importlib.import_module(info.name)
        if info.ispkg:
            walk(module)

for app in ("durable", "approvals", "reconciliation"):
    walk(importlib.import_module(app))
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "axes")))
"""

LOGIN_TEN_TIMES_WRONG_THEN_RIGHT = """
import json
import django
django.setup()
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from durable.models import SecurityEvent

call_command("migrate", verbosity=0)
User.objects.create_superuser("ann", password="a-long-enough-password")
client = Client()  # over HTTPS, as the host's SECURE_SSL_REDIRECT wants
login = "/ops/accounts/login/"
page = client.get(login, secure=True)
wrong = [client.post(login, {"username": "ann", "password": "guess"}, secure=True).status_code for _ in range(10)]
right = client.post(login, {"username": "ann", "password": "a-long-enough-password"}, secure=True)
print(json.dumps({"page": page.status_code, "wrong": wrong, "right": right.status_code,
                  "to": right.headers.get("Location"), "overview": client.get("/ops/", secure=True).status_code,
                  "throttled": SecurityEvent.objects.filter(kind=SecurityEvent.Kind.LOGIN_THROTTLED).count()}))
"""


def host_without_axes(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.host_settings_without_axes",
           "DATABASE_URL": "sqlite://:memory:"}
    out = subprocess.run([sys.executable, *args], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_check_warns_w030_instead_of_failing_to_start():
    out = host_without_axes("manage.py", "check")
    assert "durable.W030" in out.stdout + out.stderr
    assert "RuntimeError" not in out.stderr


def test_no_module_of_the_apps_but_the_lockout_loads_axes():
    out = host_without_axes("-c", IMPORT_EVERY_MODULE % {"skip": ("durable.tools", "durable.project", AXES_ONLY)})
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_the_console_login_works_and_nothing_locks_out():
    out = host_without_axes("-c", LOGIN_TEN_TIMES_WRONG_THEN_RIGHT)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["page"] == 200
    assert seen["wrong"] == [200] * 10  # the form again, saying the password is wrong; never a 429
    assert (seen["right"], seen["to"], seen["overview"]) == (302, "/ops/", 200)
    assert seen["throttled"] == 0
