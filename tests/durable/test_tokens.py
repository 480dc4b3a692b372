"""API tokens: only a hash is stored, revoked and expired tokens get 401 saying why, use is noted at most once a
minute, only the owner or a manager creates and revokes, every change is audited, and DRF's old tokens move over."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from durable.engine.tokens import PREFIX_LENGTH
from durable.errors import Conflict, Forbidden
from durable.models import ApiToken, OperatorAction, SecurityEvent
from durable.tokens import create_token, revoke_token
from tests.audit import operator_actions
from tests.conftest import make_user, user_with_roles

pytestmark = pytest.mark.django_db
RUNS = "/api/runs/"


def client_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def robot(db):
    return make_user("robot", "durable.view_run")


def test_the_stored_row_holds_the_prefix_and_a_hash_never_the_token(robot):
    row, token = create_token(user=robot, name="nightly export", source="test")
    secret = token[PREFIX_LENGTH:]
    stored = " ".join(str(value) for value in ApiToken.objects.filter(id=row.id).values().get().values())
    assert token.startswith(row.prefix) and len(secret) >= 43
    assert token not in stored and secret not in stored and row.secret_hash != token
    # The audit trail names the token by its prefix, never by its secret or hash.
    audited = str(OperatorAction.objects.get(action="create_api_token").detail)
    assert row.prefix in audited and secret not in audited and row.secret_hash not in audited


def test_a_token_acts_as_its_owner_and_keeps_the_header_clients_send(robot):
    _, token = create_token(user=robot, name="ci", source="test")
    assert client_with(token).get(RUNS).status_code == 200


def test_a_token_with_the_right_prefix_but_a_wrong_secret_is_refused(robot):
    row, token = create_token(user=robot, name="ci", source="test")
    forged = row.prefix + "_" + "A" * 43
    response = client_with(forged).get(RUNS)
    assert response.status_code == 401 and response.json()["detail"] == "Invalid token."
    assert response["WWW-Authenticate"] == "Token"


def test_a_revoked_token_gets_401_saying_it_was_revoked_and_leaves_a_trace(robot):
    row, token = create_token(user=robot, name="ci", source="test")
    revoke_token(token_id=row.id, by=robot, source="test", reason="leaked in a log")
    response = client_with(token).get(RUNS)
    assert response.status_code == 401 and "was revoked" in response.json()["detail"]
    event = SecurityEvent.objects.get(kind=SecurityEvent.Kind.TOKEN_REFUSED)
    assert event.target == row.prefix and "revoked" in event.reason


def test_an_expired_token_gets_401_saying_it_expired(robot):
    row, token = create_token(user=robot, name="ci", source="test")
    ApiToken.objects.filter(id=row.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client_with(token).get(RUNS)
    assert response.status_code == 401 and "expired at" in response.json()["detail"]


def test_a_token_of_a_deactivated_user_is_refused(robot):
    _, token = create_token(user=robot, name="ci", source="test")
    robot.is_active = False
    robot.save()
    assert client_with(token).get(RUNS).status_code == 401


def test_tokens_expire_after_the_configured_lifetime_by_default(robot, settings):
    settings.DURABLE_API_TOKEN_DAYS = 7
    row, _ = create_token(user=robot, name="ci", source="test")
    assert timedelta(days=6, hours=23) < row.expires_at - row.created_at <= timedelta(days=7)


def test_last_used_is_written_at_most_once_a_minute(robot):
    row, token = create_token(user=robot, name="ci", source="test")
    client = client_with(token)
    assert client.get(RUNS).status_code == 200
    first = ApiToken.objects.get(id=row.id).last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        client.get(RUNS)
    assert not [q for q in queries if "UPDATE" in q["sql"] and "api_token" in q["sql"].lower()]
    assert ApiToken.objects.get(id=row.id).last_used_at == first
    ApiToken.objects.filter(id=row.id).update(last_used_at=first - timedelta(minutes=2))
    client.get(RUNS)
    assert ApiToken.objects.get(id=row.id).last_used_at > first - timedelta(minutes=2)


def test_only_the_owner_or_a_manager_creates_and_revokes_a_token(robot):
    stranger = make_user("stranger", "durable.view_run")
    manager = user_with_roles("admin-ann", "admin")
    with pytest.raises(Forbidden):
        create_token(user=robot, name="not yours", by=stranger, source="test")
    row, _ = create_token(user=robot, name="made for robot", by=manager, source="test")
    with pytest.raises(Forbidden):
        revoke_token(token_id=row.id, by=stranger, source="test")
    assert ApiToken.objects.get(id=row.id).revoked_at is None
    revoke_token(token_id=row.id, by=manager, source="test", reason="rotated")
    with pytest.raises(Conflict):
        revoke_token(token_id=row.id, by=robot, source="test")
    actions = list(operator_actions().order_by("id").values_list("action", "actor_username", "source"))
    assert actions == [("create_api_token", "admin-ann", "test"), ("revoke_api_token", "admin-ann", "test")]
    assert ApiToken.objects.get(id=row.id).revoked_by == manager


def test_a_drf_token_moves_over_hashed_keeps_working_and_leaves_no_plaintext_behind(robot):
    """The migration's step, run against a table shaped like DRF's authtoken_token."""
    from importlib import import_module
    from types import SimpleNamespace

    from django.apps import apps

    move_drf_tokens = import_module("durable.migrations.0009_api_tokens").move_drf_tokens
    key = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
    with connection.cursor() as cursor:  # the test's transaction takes the table away again
        cursor.execute('CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, user_id integer, created timestamp)')
        cursor.execute('INSERT INTO authtoken_token ("key", user_id, created) VALUES (%s, %s, %s)',
                       [key, robot.id, "2024-01-02 03:04:05"])
    try:
        # What the migration's step uses of its schema editor (a real one cannot open inside SQLite's transaction).
        move_drf_tokens(apps, SimpleNamespace(connection=connection, quote_name=connection.ops.quote_name))
        row = ApiToken.objects.get(user=robot)
        assert row.prefix == key[:PREFIX_LENGTH] and key not in row.secret_hash and row.expires_at > timezone.now()
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM authtoken_token")
            assert cursor.fetchone()[0] == 0  # rest_framework.authtoken is not installed: nothing reads it
        assert client_with(key).get(RUNS).status_code == 200
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token")


def test_the_admin_shows_a_tokens_prefix_never_its_hash(robot):
    from django.contrib.auth.models import User
    from django.test import Client

    row, token = create_token(user=robot, name="ci", source="test")
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw-root-123456"))
    for path in ("/admin/durable/apitoken/", f"/admin/durable/apitoken/{row.id}/change/"):
        page = admin.get(path).content.decode()
        assert row.prefix in page and row.secret_hash not in page and token not in page, path
