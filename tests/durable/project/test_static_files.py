"""The standalone project's own static files live in the top-level static/, beside the apps' own, and its pages link them."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from durable.roles import VIEWER
from tests.conftest import user_with_roles

PROJECT_STATIC = Path(settings.BASE_DIR) / "static"
APPS = ("durable", "approvals", "reconciliation")
OWN = sorted(path.relative_to(PROJECT_STATIC).as_posix() for path in PROJECT_STATIC.rglob("*") if path.is_file())


def test_the_project_has_static_files_of_its_own_and_none_in_an_apps_namespace():
    assert "favicon.ico" in OWN
    # An override of an app's file would sit under its app's name; there is none, so none hides an app's file.
    assert [name for name in OWN if name.split("/")[0] in APPS] == []


@pytest.mark.parametrize("name", OWN)
def test_the_finders_take_each_of_the_projects_files_from_static(name):
    assert Path(finders.find(name)) == PROJECT_STATIC / name


def test_collectstatic_gathers_the_projects_files_and_the_apps_own(tmp_path, settings):
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", interactive=False, verbosity=0)
    for name in OWN:
        assert (tmp_path / name).read_bytes() == (PROJECT_STATIC / name).read_bytes(), name
    app_files = Path(settings.BASE_DIR) / "durable" / "static"
    assert (tmp_path / "durable" / "favicon.svg").read_bytes() == (app_files / "durable" / "favicon.svg").read_bytes()


@pytest.mark.django_db
def test_a_console_page_links_the_consoles_icon_and_the_projects_own():
    client = Client()
    client.force_login(user_with_roles("vera", VIEWER))
    html = client.get(reverse("durable:overview")).content.decode()
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', html)
    assert icons == ["/static/durable/favicon.svg", "/static/favicon.ico"]


def test_the_sites_favicon_ico_is_the_projects_own():
    answer = Client().get("/favicon.ico")
    assert (answer.status_code, answer["Location"]) == (301, "/static/favicon.ico")
