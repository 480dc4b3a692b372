"""The console's layout ships with the app, and a host project overrides it as it would the admin's."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.staticfiles import finders
from django.test import Client

from durable.roles import ROLES
from tests.conftest import user_with_roles

pytestmark = pytest.mark.django_db
APP_TEMPLATES = [Path(django_settings.BASE_DIR) / app / "templates" for app in ("durable", "approvals", "reconciliation")]


# Rendered while the database is away, without the request (durable/unavailable.py): no layout, no user.
STANDALONE = {"base.html", "unavailable.html"}


def test_every_page_template_extends_the_apps_layout():
    pages = [p for d in APP_TEMPLATES for p in d.rglob("*.html")
             if not p.name.startswith("_") and p.name not in STANDALONE]
    assert pages
    for page in pages:
        assert page.read_text().startswith('{% extends "durable/base.html" %}'), page


def test_the_consoles_static_files_ship_with_the_app():
    for name in ("durable/console.css", "durable/countdown.js", "durable/answer-panels.js", "durable/limits.js",
                 "durable/stacked-tables.js"):
        found = finders.find(name)
        assert found and Path(found).is_relative_to(Path(django_settings.BASE_DIR) / "durable" / "static"), name


def test_a_host_project_overrides_the_layout_with_its_own_template(settings, tmp_path):
    (tmp_path / "durable").mkdir()
    (tmp_path / "durable" / "base.html").write_text(
        "<title>Acme ops</title><main>{% block content %}{% endblock %}</main>")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]
    client = Client()
    client.force_login(user_with_roles("ops", *ROLES))
    page = client.get("/runs/").content.decode()
    assert page.startswith("<title>Acme ops</title><main>") and "Runs" in page
    assert "Acme ops" in Client().get("/accounts/login/").content.decode()
