"""API tokens: made (the token shown once), revoked, and checked on each API call; every change audited.

A user manages their own tokens; `durable.manage_apitoken` manages everyone's. A management command acts as
whoever runs it on the server (`by=None`): that person already holds the database.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from durable.audit import acting_user, audit
from durable.conf import durable_settings
from durable.engine.tokens import new_token, token_hash, token_matches, token_prefix
from durable.errors import Conflict, Forbidden, InvalidInput
from durable.models import ApiToken
from durable.permissions import Caller, Person

MANAGE = "durable.manage_apitoken"
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often per token
Actor = Caller | None


def token_lifetime() -> timedelta:
    return timedelta(days=float(durable_settings.DURABLE_API_TOKEN_DAYS))


def may_manage(*, by: Actor, owner: Person) -> bool:
    """Whether `by` may create or revoke `owner`'s tokens: their own, or anyone's with MANAGE."""
    if by is None:
        return True  # a management command, run by someone who holds the server
    return bool(by.is_authenticated and (by.pk == owner.pk or by.has_perm(MANAGE)))


def visible_tokens(*, by: Person) -> QuerySet[ApiToken]:
    """The tokens `by` may see and revoke: their own, or everyone's with MANAGE; newest first."""
    tokens = ApiToken.objects.select_related("user", "revoked_by")
    return tokens if by.has_perm(MANAGE) else tokens.filter(user=by)


def create_token(*, user: Person, name: str, expires_at: datetime | None = None, by: Actor = None,
                 source: str) -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the token, which is shown now and never again."""
    if not may_manage(by=by, owner=user):
        raise Forbidden("you may create API tokens for yourself only; managing other people's tokens needs "
                        "the durable.manage_apitoken permission")
    now = timezone.now()
    name = name.strip()
    expires_at = expires_at or now + token_lifetime()
    errors = {}
    if not name or len(name) > 100 or "\x00" in name:
        errors["name"] = ["give the token a name of 1 to 100 characters (no NUL) saying what holds it"]
    if expires_at <= now:
        errors["expires_at"] = ["a token must expire in the future"]
    if errors:
        raise InvalidInput(errors)
    token = new_token()
    with transaction.atomic():
        row = ApiToken.objects.create(user=user, name=name, prefix=token_prefix(token), secret_hash=token_hash(token),
                                      created_at=now, created_by=acting_user(by), expires_at=expires_at)
        audit(user=by, action="create_api_token", run=None, source=source, status_before="",
              status_after="active", detail=_described(row))
    return row, token


def revoke_token(*, token_id: int, by: Actor = None, source: str, reason: str = "") -> ApiToken:
    """Revoke a token now: the next call that presents it gets 401. Revoking twice is a conflict."""
    row = ApiToken.objects.select_related("user").filter(id=token_id).first()
    if row is None or not may_manage(by=by, owner=row.user):
        # The same answer for a token that does not exist and for someone else's: ids are not probed.
        raise Forbidden(f"no API token {token_id} of yours; revoking other people's tokens needs the "
                        "durable.manage_apitoken permission")
    now = timezone.now()
    with transaction.atomic():
        if not ApiToken.objects.filter(id=row.id, revoked_at__isnull=True).update(revoked_at=now,
                                                                                 revoked_by=acting_user(by)):
            raise Conflict(f"API token {row.prefix}… was already revoked", current="revoked")
        row.refresh_from_db()
        audit(user=by, action="revoke_api_token", run=None, source=source, status_before="active",
              status_after="revoked", reason=reason, detail=_described(row))
    return row


class TokenRefused(Exception):
    """Why a presented token was refused, in words a client can act on; `prefix` names a token that exists."""

    def __init__(self, message: str, prefix: str = "") -> None:
        super().__init__(message)
        self.message, self.prefix = message, prefix


def authenticate_token(token: str) -> ApiToken:
    """The live token `token` is, or TokenRefused saying why not (unknown, revoked, expired, inactive user)."""
    now = timezone.now()
    candidates = ApiToken.objects.select_related("user").filter(prefix=token_prefix(token))
    row = next((row for row in candidates if token_matches(token, row.secret_hash)), None)
    if row is None:
        raise TokenRefused("Invalid token.")
    if row.revoked_at is not None:
        raise TokenRefused(f"This API token ({row.prefix}…) was revoked at {row.revoked_at:%Y-%m-%d %H:%M:%S %Z}; "
                           "create a new one on the console's API tokens page.", row.prefix)
    if row.expires_at <= now:
        raise TokenRefused(f"This API token ({row.prefix}…) expired at {row.expires_at:%Y-%m-%d %H:%M:%S %Z}; "
                           "create a new one on the console's API tokens page.", row.prefix)
    if not row.user.is_active:
        raise TokenRefused("User inactive or deleted.", row.prefix)
    _note_use(row, now)
    return row


def _note_use(row: ApiToken, now: datetime) -> None:
    """Record the use at most once a minute per token: most calls write nothing, and two web processes
    racing write once (the UPDATE is conditioned on the old value)."""
    if row.last_used_at is not None and now - row.last_used_at < LAST_USED_EVERY:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY)
    ApiToken.objects.filter(stale, id=row.id).update(last_used_at=now)
    row.last_used_at = now


def _described(row: ApiToken) -> dict[str, str]:
    """What the audit trail says about a token: which one and whose, never its secret or hash."""
    return {"token": row.prefix, "name": row.name, "owner": row.user.get_username(),
            "expires_at": row.expires_at.isoformat()}
