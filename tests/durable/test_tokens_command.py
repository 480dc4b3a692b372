"""manage.py durable_tokens: create prints the token once (alone on stdout), list never shows one, revoke by prefix."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from durable.models import ApiToken
from tests.audit import operator_actions
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("durable_tokens", *args, stdout=out, stderr=err)
    return out.getvalue()


def status_with(token: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/runs/").status_code


def test_create_list_and_revoke_from_the_command_line():
    make_user("intake", "durable.view_run")
    token = run("create", "--user", "intake", "--name", "claims intake", "--days", "30").strip()
    assert status_with(token) == 200
    row = ApiToken.objects.get()
    listed = run("list")
    assert row.prefix in listed and "claims intake" in listed and "active" in listed
    assert token not in listed and token[len(row.prefix):] not in listed
    assert "revoked" in run("revoke", row.prefix, "--reason", "rotated")
    assert status_with(token) == 401 and "revoked" in run("list", "--user", "intake")
    audited = operator_actions().order_by("id").values_list("action", "source", "reason")
    assert list(audited) == [("create_api_token", "command", ""), ("revoke_api_token", "command", "rotated")]


def test_the_command_says_what_is_wrong():
    with pytest.raises(CommandError, match="no user is called 'ghost'"):
        run("create", "--user", "ghost", "--name", "x")
    make_user("intake")
    with pytest.raises(CommandError, match="name"):
        run("create", "--user", "intake", "--name", " ")
    with pytest.raises(CommandError, match="no API token has the id or prefix"):
        run("revoke", "dur_00000000")
    run("create", "--user", "intake", "--name", "x")
    row = ApiToken.objects.get()
    run("revoke", str(row.id))
    with pytest.raises(CommandError, match="already revoked"):
        run("revoke", str(row.id))
