"""durable as a package a host project adopts: importing it does nothing until asked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from django.conf import settings

IMPORT_AND_REPORT = """
import json, os, sys
before = dict(os.environ)
import celery._state
import durable, approvals, reconciliation
from durable import *  # every public name a workflow module imports: still no side effect
from durable import Workflow, RetryPolicy, register, bound_to_run, Revalidation, Capabilities
print(json.dumps({
    "environ_changed": sorted(set(os.environ.items()) ^ set(before.items())),
    "celery_apps": len(list(celery._state._apps)),
    "default_app": celery._state.default_app is not None,
    "django_configured": "django.conf" in sys.modules and __import__("django.conf").conf.settings.configured,
    "public": [Workflow.__name__, RetryPolicy.__name__, register.__name__, bound_to_run.__name__,
               Revalidation.__name__, Capabilities.__name__],
}))
"""


def test_importing_the_apps_with_no_settings_has_no_side_effect():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", IMPORT_AND_REPORT], env=env, cwd=settings.BASE_DIR,
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report == {"environ_changed": [], "celery_apps": 0, "default_app": False, "django_configured": False,
                      "public": ["Workflow", "RetryPolicy", "register", "bound_to_run", "Revalidation",
                                 "Capabilities"]}


def test_each_app_declares_its_annotations_with_py_typed():
    """PEP 561: a host project's type checker reads an installed package's annotations only beside py.typed,
    which package-data puts in the wheel (bin/test-package checks the built wheel holds it)."""
    pyproject = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    for package in ("durable", "approvals", "reconciliation"):
        assert (Path(settings.BASE_DIR) / package / "py.typed").is_file(), package
        assert "py.typed" in package_data[package], package
