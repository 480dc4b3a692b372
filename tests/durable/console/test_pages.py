"""The page showing an object an app owns the screen of (durable/console/pages.py): a link, or none."""
import uuid

import pytest
from django.urls import reverse

from durable.console import pages
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_the_apps_register_the_pages_they_show():
    request_id, operation = uuid.uuid4(), "a" * 32
    assert pages.page_url("approval", request_id) == reverse("approvals:detail", args=[request_id])
    assert pages.page_url("operation", operation) == reverse("reconciliation:operation", args=[operation])
    assert pages.page_url("operations") == reverse("reconciliation:operations")


def test_a_kind_no_installed_app_shows_has_no_link(monkeypatch):
    monkeypatch.setattr(pages, "_pages", {})
    assert pages.page_url("approval", uuid.uuid4()) == ""


def test_a_user_without_the_pages_permission_gets_no_link():
    request_id = uuid.uuid4()
    assert pages.page_url("approval", request_id, user=make_user("watcher", "durable.view_run")) == ""
    reader = make_user("reader", "approvals.view_approvalrequest")
    assert pages.page_url("approval", request_id, user=reader) == reverse("approvals:detail", args=[request_id])


def test_a_page_whose_urls_are_not_mounted_has_no_link(monkeypatch):
    monkeypatch.setitem(pages._pages, "ghost", pages.Page("ghost:detail"))
    assert pages.page_url("ghost", 1) == ""
